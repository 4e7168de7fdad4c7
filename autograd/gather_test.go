package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestGatherFixture(t *testing.T) {
	runFixture(t, "gather", plain(func(c *fixCase, in []*Variable) *Variable { return Gather(in[0], c.int("axis"), c.ints("index")) }))
}

func TestGatherGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Gather(xs[0], 1, []int{0, 4, 4, 2}) }, randT(1, 1, 0, 4, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return Gather(xs[0], 0, []int{2, 2, 0}) }, randT(2, 1, 0, 3, 3))
	gradCheck(t, func(xs []*Variable) *Variable { return Gather(xs[0], 1, []int{0, 1, 2, 2, 1, 0}) }, randT(3, 1, 0, 2, 3, 3))
}

func TestGatherBadIndexPanics(t *testing.T) {
	x := Const(tensor.New(tensor.Float32, 2, 3))
	require.Panics(t, func() { Gather(x, 1, []int{0, 3}) })
	require.Panics(t, func() { Gather(x, 1, []int{0}) })
}
