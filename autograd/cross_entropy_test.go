package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"goddp/tensor"
)

func TestCrossEntropyFixture(t *testing.T) {
	runFixture(t, "cross_entropy", plain(func(c *fixCase, in []*Variable) *Variable {
		return CrossEntropy(in[0], c.ints("target"), c.reduction())
	}))
}

func TestCrossEntropyGradCheck(t *testing.T) {
	target := []int{2, 0, 4, 4, 1}
	for _, r := range []Reduction{ReductionMean, ReductionSum, ReductionNone} {
		t.Run(r.String(), func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return CrossEntropy(xs[0], target, r) }, randT(1, 2, 0, 5, 5))
		})
	}
}

func TestCrossEntropyStableForLargeLogits(t *testing.T) {
	x := Param(tensor.FromF32([]float32{1000, 0, -1000, 0}, 2, 2))
	loss := CrossEntropy(x, []int{1, 0}, ReductionSum)
	require.InDelta(t, 2000, loss.Value.Item(), 1e-3)
	require.NoError(t, loss.Backward())
	require.InDeltaSlice(t, []float32{1, -1, -1, 1}, x.Grad.F32(), 1e-6)
}

func TestCrossEntropyBadTargetPanics(t *testing.T) {
	x := Param(tensor.New(tensor.Float32, 2, 3))
	require.Panics(t, func() { CrossEntropy(x, []int{0, 3}, ReductionMean) })
	require.Panics(t, func() { CrossEntropy(x, []int{0}, ReductionMean) })
}
