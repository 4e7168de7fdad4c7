package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestLayerNormFixture(t *testing.T) {
	runFixture(t, "layer_norm", plain(func(c *fixCase, in []*Variable) *Variable {
		if len(in) == 1 {
			return LayerNorm(in[0], nil, nil, c.float("eps"))
		}
		return LayerNorm(in[0], in[1], in[2], c.float("eps"))
	}))
}

func TestLayerNormGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], xs[2], 1e-5) },
		randT(1, 1, 0, 4, 6), randT(2, 0.3, 1, 6), randT(3, 1, 0, 6))
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], nil, nil, 1e-5) }, randT(4, 1, 0, 3, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], nil, 1e-5) }, randT(5, 1, 0, 2, 3, 4), randT(6, 0.3, 1, 4))
	// Normalized over the two trailing dims.
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], xs[2], 1e-5) },
		randT(7, 1, 0, 2, 3, 4), randT(8, 0.3, 1, 3, 4), randT(9, 1, 0, 3, 4))
}

// LayerNorm keeps x and each row's mean and rstd (in x's dtype) for its
// backward, as torch's layer_norm does, not the normalized input; a
// non-contiguous x's contiguous copy goes back to the cache with the graph.
func TestLayerNormKeepsStatistics(t *testing.T) {
	x := Param(tensor.AsType(randT(1, 1, 0, 64, 96), tensor.Float32))
	w, b := Param(tensor.Ones(tensor.Float32, 64)), Param(tensor.Zeros(tensor.Float32, 64))
	xt := Transpose(x, 0, 1) // [96, 64], not contiguous
	y := LayerNorm(xt, w, b, 1e-5)
	op := y.Creator().(*layerNormOp)
	require.Equal(t, []int{96}, op.mean.Shape())
	require.Equal(t, []int{96}, op.rstd.Shape())
	require.Equal(t, tensor.Float32, op.rstd.DType())
	require.NotSame(t, xt.Value, op.xc, "a non-contiguous input is copied")
	loss := SumAll(Mul(y, y))
	require.NoError(t, loss.Backward())
	loss.FreeGraph()
	require.Panics(t, func() { op.xc.F32() }, "the copy was recycled")
	require.NotPanics(t, func() { x.Value.F32() }, "the parameter was kept")
}
