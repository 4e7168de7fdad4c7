package autograd

import "testing"

func TestMeanAllFixture(t *testing.T) {
	runFixture(t, "mean_all", plain(func(_ *fixCase, in []*Variable) *Variable { return MeanAll(in[0]) }))
}

func TestMeanAllGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return MeanAll(xs[0]) }, randT(1, 1, 0, 3, 4))
}
