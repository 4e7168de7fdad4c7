package autograd

import "testing"

func TestSigmoidFixture(t *testing.T) {
	runFixture(t, "sigmoid", plain(func(_ *fixCase, in []*Variable) *Variable { return Sigmoid(in[0]) }))
}

func TestSigmoidGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Sigmoid(xs[0]) }, randT(1, 2, 0, 3, 4))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return Sigmoid(Mul(xs[0], xs[1])) }, randT(1, 2, 0, 3, 4), randT(2, 0.5, 1, 3, 4))
}

func TestSigmoidFloat32MatchesFloat64(t *testing.T) {
	checkF32MatchesF64(t, Sigmoid, sweepT(100, 100, 2001, 17.33, -103.9, 1e-30, 0), 4)
}
