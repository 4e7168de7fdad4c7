package autograd

import "testing"

func TestSumAllFixture(t *testing.T) {
	runFixture(t, "sum_all", plain(func(_ *fixCase, in []*Variable) *Variable { return SumAll(in[0]) }))
}

func TestSumAllGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return SumAll(xs[0]) }, randT(1, 1, 0, 2, 3, 2))
}
