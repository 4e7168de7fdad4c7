package autograd

import "testing"

func TestTransposeFixture(t *testing.T) {
	runFixture(t, "transpose", plain(func(c *fixCase, in []*Variable) *Variable { return Transpose(in[0], c.int("d0"), c.int("d1")) }))
}

func TestTransposeGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Transpose(xs[0], 0, 2) }, randT(1, 1, 0, 2, 3, 4))
	// Strided views feed ops that need contiguous data.
	gradCheck(t, func(xs []*Variable) *Variable { return MatMul(xs[0], Transpose(xs[1], 0, 1)) }, randT(1, 1, 0, 3, 4), randT(2, 1, 0, 5, 4))
	gradCheck(t, func(xs []*Variable) *Variable { return Exp(Transpose(xs[0], -1, -2)) }, randT(1, 1, 0, 2, 3, 4))
}
