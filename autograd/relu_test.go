package autograd

import "testing"

func TestReLUFixture(t *testing.T) {
	runFixture(t, "relu", plain(func(_ *fixCase, in []*Variable) *Variable { return ReLU(in[0]) }))
}

func TestReLUGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return ReLU(xs[0]) }, awayFrom(randT(1, 1, 0, 3, 5), 0.01, 0))
	// In place on an owned gradient: ReLU after a fresh op.
	gradCheck(t, func(xs []*Variable) *Variable { return ReLU(ReLU(xs[0])) }, awayFrom(randT(2, 1, 0, 4), 0.01, 0))
}
