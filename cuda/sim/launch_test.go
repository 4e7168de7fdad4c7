package sim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/kernels"
	"github.com/goddp/goddp/cuda/sim"
)

// The device runs exactly the kernels the GPU build loads.
func TestKernelsMatchPTX(t *testing.T) {
	assert.Equal(t, kernels.Names(), sim.Kernels())
}

// kernels.cu's 64-bit index math, at grids no test could allocate: the
// last thread of a 2^22-block grid of 1024 threads is element 2^32-1, and
// the stride is 2^32; 32-bit arithmetic wraps both.
func TestGlobalIndexPast2To31(t *testing.T) {
	cases := []struct{ b, grid, block, t uint32 }{
		{0, 1, 1, 0},
		{3, 7, 5, 4},
		{1 << 21, 1 << 22, 1024, 0},      // first index 2^31
		{1<<22 - 1, 1 << 22, 1024, 1023}, // 2^32 - 1
		{math.MaxInt32 - 1, math.MaxInt32, 1024, 1023},
	}
	for _, c := range cases {
		idx, stride := sim.GlobalIndex(c.b, c.grid, c.block, c.t)
		assert.Equal(t, int64(c.b)*int64(c.block)+int64(c.t), idx)
		assert.Equal(t, int64(c.grid)*int64(c.block), stride)
	}
	idx, _ := sim.GlobalIndex(1<<21, 1<<22, 1024, 0)
	assert.Equal(t, int64(1)<<31, idx)
	b32, d32 := uint32(1<<21), uint32(1024)
	assert.NotEqual(t, idx, int64(int32(b32*d32)), "32-bit math would have wrapped here")
}

func TestLaunchRejectsBadLaunches(t *testing.T) {
	d := newDevice(t)
	s := d.NewStream("s")
	assert.ErrorIs(t, s.Launch("nope", 1, 1), sim.ErrLaunch)
	s2 := d.NewStream("s2")
	assert.ErrorContains(t, s2.Launch("fill_f32", 1, 1, 0), "takes 3 arguments, got 1")
	s3 := d.NewStream("s3")
	assert.ErrorContains(t, s3.Launch("fill_f32", 1, 1025, 0, 0, 0), "block 1025")
	assert.ErrorIs(t, s3.Synchronize(), sim.ErrLaunch, "a rejected launch makes the stream's error sticky")
}

// Kernels run concurrently with the host and in stream order.
func TestLaunchFill(t *testing.T) {
	d := newDevice(t)
	s := d.Compute()
	b, err := d.Alloc(4 * 1000)
	require.NoError(t, err)
	defer b.Free()
	require.NoError(t, s.Launch("fill_f32", 3, 7, sim.Ptr(b), sim.F32(2.5), sim.I64(999)))
	require.NoError(t, s.Synchronize())
	x := b.F32()
	for i := range 999 {
		require.Equal(t, float32(2.5), x[i], i)
	}
	assert.Equal(t, float32(0), x[999], "wrote past n")
}
