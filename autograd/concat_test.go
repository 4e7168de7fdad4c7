package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestConcatFixture(t *testing.T) {
	runFixture(t, "concat", plain(func(c *fixCase, in []*Variable) *Variable { return Concat(c.int("axis"), in...) }))
}

func TestConcatGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Concat(0, xs...) }, randT(1, 1, 0, 2, 3), randT(2, 1, 0, 1, 3))
	gradCheck(t, func(xs []*Variable) *Variable { return Concat(1, xs...) }, randT(1, 1, 0, 2, 2, 2), randT(2, 1, 0, 2, 3, 2))
	gradCheck(t, func(xs []*Variable) *Variable { return Concat(-1, xs[0], xs[1], xs[0]) }, randT(1, 1, 0, 2, 3), randT(2, 1, 0, 2, 1))
}

func TestConcatBadShapesPanic(t *testing.T) {
	require.Panics(t, func() {
		Concat(0, Const(tensor.New(tensor.Float32, 2, 3)), Const(tensor.New(tensor.Float32, 2, 4)))
	})
}
