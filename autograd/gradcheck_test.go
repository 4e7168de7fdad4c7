package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// badSquare computes x² but claims its gradient is x (not 2x).
type badSquare struct{ inputs }

func (o *badSquare) Name() string { return "badSquare" }
func (o *badSquare) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.Mul(gy, o.in(0).Value)}
}

func TestGradCheckCatchesWrongGradient(t *testing.T) {
	f := func(xs []*Variable) *Variable {
		return FromOp(tensor.Mul(xs[0].Value, xs[0].Value), &badSquare{ins(xs[0])})
	}
	err := GradCheck(f, []*tensor.Tensor{randT(1, 1, 0, 3)}, GradCheckOptions{})
	require.ErrorIs(t, err, ErrGradCheck)
	require.Contains(t, err.Error(), "analytic")
}

func TestGradCheckRejectsFloat32(t *testing.T) {
	err := GradCheck(func(xs []*Variable) *Variable { return SumAll(xs[0]) },
		[]*tensor.Tensor{tensor.New(tensor.Float32, 2)}, GradCheckOptions{})
	require.ErrorIs(t, err, ErrGradCheck)
}

func TestGradCheckRestoresInputs(t *testing.T) {
	x := randT(1, 1, 0, 4)
	before := append([]float64(nil), x.F64()...)
	require.NoError(t, GradCheck(func(xs []*Variable) *Variable { return Exp(xs[0]) }, []*tensor.Tensor{x}, GradCheckOptions{}))
	require.Equal(t, before, x.F64())
}
