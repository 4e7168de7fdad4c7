package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestIndexSelectFixture(t *testing.T) {
	runFixture(t, "index_select", plain(func(c *fixCase, in []*Variable) *Variable {
		return IndexSelect(in[0], c.int("axis"), c.ints("index"))
	}))
}

func TestIndexSelectGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return IndexSelect(xs[0], 0, []int{0, 2, 2, 4}) }, randT(1, 1, 0, 5, 3))
	gradCheck(t, func(xs []*Variable) *Variable { return IndexSelect(xs[0], -1, []int{1, 1}) }, randT(2, 1, 0, 2, 3, 2))
}

// TestIndexSelectAccumulatesIntoGrad: an embedding table's gradient is
// scattered straight into its existing Grad buffer.
func TestIndexSelectAccumulatesIntoGrad(t *testing.T) {
	w := Param(randT(1, 1, 0, 4, 2))
	require.NoError(t, SumAll(IndexSelect(w, 0, []int{1, 1, 3})).Backward())
	g := w.Grad
	require.Equal(t, []float64{0, 0, 2, 2, 0, 0, 1, 1}, g.F64())
	require.NoError(t, SumAll(IndexSelect(w, 0, []int{0})).Backward())
	require.Same(t, g, w.Grad)
	require.Equal(t, []float64{1, 1, 2, 2, 0, 0, 1, 1}, g.F64())
}

func TestIndexSelectBadIndexPanics(t *testing.T) {
	require.Panics(t, func() { IndexSelect(Const(tensor.New(tensor.Float32, 2, 3)), 0, []int{2}) })
}
