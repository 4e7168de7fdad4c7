package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestWhereFixture(t *testing.T) {
	runFixture(t, "where", plain(func(c *fixCase, in []*Variable) *Variable { return Where(in[0].Value, in[1], in[2]) }))
}

func TestWhereGradCheck(t *testing.T) {
	cond := tensor.FromF64([]float64{1, 0, 0, 1, 1, 0}, 2, 1, 3)
	gradCheck(t, func(xs []*Variable) *Variable { return Where(cond, xs[0], xs[1]) }, randT(1, 1, 0, 4, 3), randT(2, 1, 0, 2, 4, 1))
	// The same variable on both sides gets the whole gradient.
	gradCheck(t, func(xs []*Variable) *Variable { return Where(cond, xs[0], xs[0]) }, randT(3, 1, 0, 2, 4, 3))
}

func TestWhereBadShapesPanic(t *testing.T) {
	a, b := Param(randT(1, 1, 0, 3, 4)), Param(randT(2, 1, 0, 3, 4))
	require.Panics(t, func() { Where(tensor.Ones(tensor.Float64, 2, 4), a, b) })
}
