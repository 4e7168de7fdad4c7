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
	var x cuda.Tensor
	h := tensor.Zeros(tensor.Float32, 2)
	tests := []struct {
		name string
		run  func() error
	}{
		{"Alloc", func() error { _, err := c.Alloc(tensor.Float32, 2); return err }},
		{"ToDevice", func() error { _, err := c.ToDevice(h); return err }},
		{"To", func() error { _, err := c.To(h, cuda.CUDA(0)); return err }},
		{"MatMul", func() error { return c.MatMul(&x, &x, &x, false, false, 1, 0) }},
		{"MSE", func() error { _, err := c.MSE(&x, &x, &x); return err }},
		{"SoftmaxCrossEntropy", func() error { _, err := c.SoftmaxCrossEntropy(&x, &x, nil); return err }},
		{"SGD", func() error { return c.SGD(&x, &x, 0.1) }},
		{"ToHost", func() error { _, err := x.ToHost(); return err }},
		{"Synchronize", c.Synchronize},
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
