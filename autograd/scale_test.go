package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestScaleGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Scale(xs[0], -2.5) }, randT(1, 1, 0, 3, 4))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return Scale(Mul(xs[0], xs[1]), 3) }, randT(1, 1, 0, 3, 4), randT(2, 0.5, 1, 3, 4))
}

// Scale gives Mul by a constant tensor's value and gradient bit for bit
// (GradScaler's scaled loss was that Mul before devices ran it), and leaves
// its input alone.
func TestScaleIsMulByConstant(t *testing.T) {
	x := tensor.Randn(tensor.NewRNG(4), tensor.Float32, 5, 3)
	const s = 65536 * 3.0000002
	k := tensor.ZerosAs(x, 5, 3)
	tensor.Fill(k, s)
	a, b := Param(x.Clone()), Param(x.Clone())
	ya, yb := SumAll(Scale(a, s)), SumAll(Mul(b, Const(k)))
	require.NoError(t, ya.Backward())
	require.NoError(t, yb.Backward())
	require.Equal(t, yb.Value.F32(), ya.Value.F32())
	require.Equal(t, b.Grad.F32(), a.Grad.F32())
	require.Equal(t, x.F32(), a.Value.F32())
}
