//go:build !cuda

package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// Without -tags cuda every entry point says how to get CUDA.
func TestNotCompiled(t *testing.T) {
	_, err := cuda.NewContext(0)
	require.ErrorIs(t, err, cuda.ErrNotCompiled)
	assert.Contains(t, err.Error(), "-tags cuda")

	var c cuda.Context
	tests := []struct {
		name string
		run  func() error
	}{
		{"Synchronize", c.Synchronize},
		{"Close", c.Close},
		{"SetAllowTF32", func() error { return c.SetAllowTF32(true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.run(), cuda.ErrNotCompiled)
		})
	}
}

// "cuda:N" is a registered kind in every build; without the tag opening it
// says how to get CUDA.
func TestOpenDeviceNotCompiled(t *testing.T) {
	assert.Contains(t, tensor.DeviceKinds(), "cuda")
	_, err := tensor.OpenDevice("cuda:0")
	require.ErrorIs(t, err, cuda.ErrNotCompiled)
	require.ErrorIs(t, err, tensor.ErrDevice)
}
