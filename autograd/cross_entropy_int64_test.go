package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// An int64 target tensor (torch's long) gives the loss and gradient of the
// same indices as a []int, in 2-D and in the K-dimensional form; a float
// target tensor is refused naming its dtype.
func TestCrossEntropyInt64Targets(t *testing.T) {
	rng := tensor.NewRNG(3)
	labels := []int{2, 0, 4, 1, DefaultIgnoreIndex, 3}
	x1 := Param(tensor.Randn(rng, tensor.Float32, 6, 5))
	x2 := Param(x1.Value.Clone())
	l1 := CrossEntropy(x1, labels, ReductionMean)
	l2 := CrossEntropy(x2, tensor.FromInts(labels, 6), ReductionMean)
	require.Equal(t, l1.Value.Item(), l2.Value.Item())
	require.NoError(t, l1.Backward())
	require.NoError(t, l2.Backward())
	require.Equal(t, x1.Grad.F32(), x2.Grad.F32())

	// [N, C, T] logits against [N, T] int64 targets.
	k1 := Param(tensor.Randn(rng, tensor.Float32, 2, 5, 3))
	seq := []int{0, 4, 2, 1, 1, 3}
	a := CrossEntropy(k1, seq, ReductionSum).Value.Item()
	b := CrossEntropy(k1, tensor.FromInts(seq, 2, 3), ReductionSum).Value.Item()
	require.Equal(t, a, b)

	require.PanicsWithValue(t, "autograd: CrossEntropy: a target tensor of float32; class indices are an int64 tensor (as torch's long)",
		func() { CrossEntropy(x1, tensor.New(tensor.Float32, 6), ReductionMean) })
}
