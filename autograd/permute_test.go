package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestPermuteFixture(t *testing.T) {
	runFixture(t, "permute", plain(func(c *fixCase, in []*Variable) *Variable {
		y := Permute(in[0], c.ints("dims")...)
		if c.has("matmul") {
			return MatMul(y, in[1])
		}
		return y
	}))
}

func TestPermuteGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Permute(xs[0], 2, 0, 1) }, randT(1, 1, 0, 2, 3, 4))
	// The inverse permutation of a 4-cycle is not the permutation itself.
	gradCheck(t, func(xs []*Variable) *Variable { return Exp(Permute(xs[0], 1, 2, 3, 0)) }, randT(2, 1, 0, 2, 3, 4, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return MatMul(Permute(xs[0], 0, 2, 1), xs[1]) },
		randT(3, 1, 0, 2, 4, 3), randT(4, 1, 0, 2, 4, 5))
}

func TestPermuteIsAView(t *testing.T) {
	x := Param(randT(1, 1, 0, 2, 3))
	y := Permute(x, 1, 0)
	require.Equal(t, []int{3, 2}, y.Shape())
	require.False(t, y.Value.IsContiguous())
	require.Equal(t, x.Value.At(1, 2), y.Value.At(2, 1))
	require.Panics(t, func() { Permute(x, 0) }, "too few dims")
	require.Panics(t, func() { Permute(x, 0, 0) }, "repeated dim")
	require.Panics(t, func() { Permute(x, 0, 2) }, "dim out of range")
	_ = tensor.Float64
}
