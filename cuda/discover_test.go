package cuda_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/cuda"
)

// Without a driver (as where this was written) discovery fails cleanly;
// with GPUs it lists them.
func TestDiscover(t *testing.T) {
	devs, err := cuda.Discover()
	n, cerr := cuda.DeviceCount()
	if err != nil {
		t.Logf("no GPU: %v", err)
		assert.ErrorIs(t, err, cuda.ErrNoNVML)
		assert.True(t, errors.Is(cerr, cuda.ErrNoNVML) || errors.Is(cerr, cuda.ErrNoDevice), "%v", cerr)
		return
	}
	t.Logf("GPUs: %+v", devs)
	assert.Len(t, devs, n)
	for i, d := range devs {
		assert.Equal(t, i, d.Index)
		assert.NotEmpty(t, d.Name)
	}
}

func TestDevice(t *testing.T) {
	assert.Equal(t, "cpu", cuda.CPU.String())
	assert.True(t, cuda.CPU.IsCPU())
	assert.Equal(t, -1, cuda.CPU.Ordinal())
	assert.Equal(t, "cuda:1", cuda.CUDA(1).String())
	assert.Equal(t, 1, cuda.CUDA(1).Ordinal())
	assert.False(t, cuda.CUDA(0).IsCPU())
	var zero cuda.Device
	assert.Equal(t, cuda.CPU, zero)
}

// Each rank's GPU is cuda:LOCAL_RANK (an ordinal among the visible
// devices), cuda:0 without a launcher.
func TestLocalDevice(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want cuda.Device
		err  bool
	}{{"", cuda.CUDA(0), false}, {"3", cuda.CUDA(3), false}, {"x", cuda.CPU, true}, {"-1", cuda.CPU, true}} {
		t.Setenv("LOCAL_RANK", tc.env)
		d, err := cuda.LocalDevice()
		assert.Equal(t, tc.want, d, "LOCAL_RANK=%q", tc.env)
		assert.Equal(t, tc.err, err != nil, "LOCAL_RANK=%q: %v", tc.env, err)
	}
}
