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

// Each rank's GPU is cuda:LOCAL_RANK (an ordinal among the visible
// devices), cuda:0 without a launcher.
func TestLocalOrdinal(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
		err  bool
	}{{"", 0, false}, {"3", 3, false}, {"x", 0, true}, {"-1", 0, true}} {
		t.Setenv("LOCAL_RANK", tc.env)
		d, err := cuda.LocalOrdinal()
		assert.Equal(t, tc.want, d, "LOCAL_RANK=%q", tc.env)
		assert.Equal(t, tc.err, err != nil, "LOCAL_RANK=%q: %v", tc.env, err)
	}
}
