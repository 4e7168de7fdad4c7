package autograd

import "testing"

func TestNegFixture(t *testing.T) {
	runFixture(t, "neg", plain(func(_ *fixCase, in []*Variable) *Variable { return Neg(in[0]) }))
}

func TestNegGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Neg(xs[0]) }, randT(1, 1, 0, 3, 4))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return Neg(Mul(xs[0], xs[1])) }, randT(1, 1, 0, 3, 4), randT(2, 0.5, 1, 3, 4))
}
