package autograd

import "testing"

func TestMSELossFixture(t *testing.T) {
	runFixture(t, "mse_loss", plain(func(c *fixCase, in []*Variable) *Variable {
		return MSELoss(in[0], in[1], c.reduction())
	}))
}

func TestMSELossGradCheck(t *testing.T) {
	for _, r := range []Reduction{ReductionMean, ReductionSum, ReductionNone} {
		t.Run(r.String(), func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return MSELoss(xs[0], xs[1], r) },
				randT(1, 1, 0, 4, 3), randT(2, 1, 0, 4, 3))
		})
	}
}
