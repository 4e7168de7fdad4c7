package autograd

import "testing"

func TestLogFixture(t *testing.T) {
	runFixture(t, "log", plain(func(_ *fixCase, in []*Variable) *Variable { return Log(in[0]) }))
}

func TestLogGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Log(xs[0]) }, absShift(randT(1, 1, 0, 3, 4), 0.2))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return Log(Mul(xs[0], xs[1])) }, absShift(randT(1, 1, 0, 3, 4), 0.2), randT(2, 0.5, 1, 3, 4))
}
