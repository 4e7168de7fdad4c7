package autograd

import "testing"

func TestReshapeFixture(t *testing.T) {
	runFixture(t, "reshape", plain(func(c *fixCase, in []*Variable) *Variable { return Reshape(in[0], c.ints("shape")...) }))
}

func TestReshapeGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Reshape(xs[0], 6, -1) }, randT(1, 1, 0, 2, 3, 2))
	// A gradient view flowing into a leaf must be copied, not adopted.
	gradCheck(t, func(xs []*Variable) *Variable { return Mul(Reshape(xs[0], 3, 2), Reshape(xs[0], 3, 2)) }, randT(1, 1, 0, 6))
	// Reshape of a transposed (non-contiguous) value.
	gradCheck(t, func(xs []*Variable) *Variable { return Reshape(Transpose(xs[0], 0, 1), -1) }, randT(1, 1, 0, 2, 3))
}
