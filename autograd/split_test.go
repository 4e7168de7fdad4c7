package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// weightedCat is the fixtures' cat([p * (i+1) for i, p in enumerate(pieces)]):
// distinct weights make each piece's gradient distinguishable.
func weightedCat(dt tensor.DType, pieces []*Variable, axis int) *Variable {
	ws := make([]*Variable, len(pieces))
	for i, p := range pieces {
		ws[i] = Mul(p, Const(tensor.Full(dt, float64(i+1))))
	}
	return Concat(axis, ws...)
}

func TestSplitFixture(t *testing.T) {
	runFixture(t, "split", func(c *fixCase, dt tensor.DType, in []*Variable) (*Variable, map[string]*tensor.Tensor) {
		var pieces []*Variable
		if c.has("sizes") {
			pieces = SplitSizes(in[0], c.ints("sizes"), c.int("axis"))
		} else {
			pieces = Split(in[0], c.int("size"), c.int("axis"))
		}
		return weightedCat(dt, pieces, c.int("axis")), nil
	})
}

func TestChunkFixture(t *testing.T) {
	runFixture(t, "chunk", func(c *fixCase, dt tensor.DType, in []*Variable) (*Variable, map[string]*tensor.Tensor) {
		return weightedCat(dt, Chunk(in[0], c.int("chunks"), c.int("axis")), c.int("axis")), nil
	})
}

func TestSplitGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable {
		p := Split(xs[0], 2, -1)
		return Add(Mul(p[0], p[1]), Exp(p[2]))
	}, randT(1, 1, 0, 3, 6))
	gradCheck(t, func(xs []*Variable) *Variable {
		p := Chunk(xs[0], 2, 0)
		return Mul(p[0], p[1])
	}, randT(2, 1, 0, 4, 3))
}

func TestSplitShapes(t *testing.T) {
	x := Param(randT(1, 1, 0, 7, 2))
	var got [][]int
	for _, p := range Split(x, 3, 0) {
		got = append(got, p.Shape())
	}
	require.Equal(t, [][]int{{3, 2}, {3, 2}, {1, 2}}, got)
	got = nil
	for _, p := range Chunk(Param(randT(1, 1, 0, 6, 1)), 4, 0) {
		got = append(got, p.Shape())
	}
	require.Equal(t, [][]int{{2, 1}, {2, 1}, {2, 1}}, got, "torch.chunk(6, 4) gives 3 pieces of 2")
	require.Panics(t, func() { SplitSizes(x, []int{3, 3}, 0) }, "sizes must sum to the axis")
	require.Panics(t, func() { Split(x, 0, 0) })
	require.Panics(t, func() { Chunk(x, 0, 0) })
}
