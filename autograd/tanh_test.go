package autograd

import "testing"

func TestTanhFixture(t *testing.T) {
	runFixture(t, "tanh", plain(func(_ *fixCase, in []*Variable) *Variable { return Tanh(in[0]) }))
}

func TestTanhGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Tanh(xs[0]) }, randT(1, 1, 0, 3, 4))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return Tanh(Mul(xs[0], xs[1])) }, randT(1, 1, 0, 3, 4), randT(2, 0.5, 1, 3, 4))
}

func TestTanhFloat32MatchesFloat64(t *testing.T) {
	checkF32MatchesF64(t, Tanh, sweepT(12, 12, 2001, 9.01, 1e-4, -1e-30, 1e-38, 0), 4)
}
