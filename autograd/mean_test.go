package autograd

import "testing"

func TestMeanFixture(t *testing.T) {
	runFixture(t, "mean", plain(func(c *fixCase, in []*Variable) *Variable {
		return Mean(in[0], fixtureAxes(c), c.bool("keepdim"))
	}))
}

func TestMeanGradCheck(t *testing.T) {
	for i, tc := range reductionCases {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Mean(xs[0], tc.axes, tc.keepDim) }, randT(uint64(i), 1, 0, tc.shape...))
		})
	}
}
