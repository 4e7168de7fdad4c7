//go:build cuda

package cuda

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// The tensor device over a Context drives the device as the op table says:
// one training step of a Linear layer with cross-entropy and SGD on the
// fake GPU issues the uploads, the kernels and the row-major GEMMs mapped
// onto column-major cuBLAS (operands swapped), and reads back only the
// loss. The numbers themselves are checked on goddp/cuda/sim, which runs
// the same op table and kernels.cu.
func TestTensorsTrainingStepCalls(t *testing.T) {
	c, f := newFake(t)
	dev := c.Tensors()
	require.Same(t, dev, c.Tensors())
	require.Equal(t, "cuda:0", dev.String())
	model := nn.NewLinear(tensor.NewRNG(0), 3, 2)
	require.NoError(t, nn.To(model, dev))
	require.Equal(t, 2, f.count("htod"), "weight and bias uploaded")
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	x, err := tensor.Ones(tensor.Float32, 4, 3).To(dev)
	require.NoError(t, err)
	loss := autograd.CrossEntropy(model.Forward(autograd.Const(x)), []int{0, 1, 1, 0}, autograd.ReductionMean)
	require.NoError(t, loss.Backward())
	require.NoError(t, opt.Step())
	_ = loss.Value.Item()

	var kernels []string
	for _, l := range f.launches {
		kernels = append(kernels, l.kernel)
	}
	// SGD without momentum updates every parameter in one launch
	// (optim's Foreach default: multi_tensor_sgd_f32, not axpy_f32 per
	// parameter).
	for _, k := range []string{"add_bias_f32", "softmax_ce_f32", "sum_f32", "fill_f32", "scale_by_f32", "col_sums_part_f32", "col_sums_f32", "multi_tensor_sgd_f32"} {
		require.Contains(t, kernels, k)
	}
	// y[4,2] = x[4,3]·wᵀ is cuBLAS's (n, m, k) = (2, 4, 3); dW[2,3] = gyᵀ·x
	// is (3, 2, 4); x needs no gradient, so no dX.
	require.Equal(t, 2, f.gemms)
	require.True(t, slices.Contains(f.calls, "sgemm 2 4 3"), "%v", f.calls)
	require.True(t, slices.Contains(f.calls, "sgemm 3 2 4"), "%v", f.calls)
	require.Equal(t, 1, f.count("dtoh"), "only the loss comes back to the host")
	for _, l := range f.launches {
		require.LessOrEqual(t, l.block, uint32(1024))
		require.GreaterOrEqual(t, l.grid, uint32(1))
	}
}

// A cuBLAS failure inside an op, which returns no error, comes back from
// the next copy to the host; unreachable tensors' blocks go back to the
// cache, and EmptyCache frees them.
func TestTensorsStickyErrorAndFree(t *testing.T) {
	c, f := newFake(t)
	dev := c.Tensors()
	a, err := tensor.ZerosOn(dev, tensor.Float32, 2, 2)
	require.NoError(t, err)
	f.gemmFail = 1
	k := tensor.KernelsOf("test", a)
	k.Gemm(false, false, 2, 2, 2, 1, a, 2, a, 2, 0, a, 2)
	_, err = a.To(tensor.CPU())
	require.ErrorIs(t, err, ErrCUBLAS)

	inUse, _ := tensor.MemoryStatsOf(dev)
	for range 10 {
		_, err := tensor.ZerosOn(dev, tensor.Float32, 16)
		require.NoError(t, err)
	}
	// Collected tensors give their blocks back to the caching allocator
	// (no cuMemFree from a GC cleanup); EmptyCache frees them on the device.
	deadline := time.Now().Add(5 * time.Second)
	st, _ := tensor.MemoryStatsOf(dev)
	for st.Allocated > inUse.Allocated && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		st, _ = tensor.MemoryStatsOf(dev)
	}
	require.Equal(t, inUse.Allocated, st.Allocated, "collected tensors give their blocks back to the cache")
	require.Greater(t, st.Reserved, st.Allocated, "the blocks stay cached")
	before := f.count("free")
	tensor.EmptyCache(dev)
	require.Greater(t, f.count("free"), before, "EmptyCache frees the cached blocks on the device")
	st, _ = tensor.MemoryStatsOf(dev)
	require.Equal(t, st.Allocated, st.Reserved)
	runtime.KeepAlive(a)
}
