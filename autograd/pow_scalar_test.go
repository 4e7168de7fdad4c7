package autograd

import (
	"fmt"
	"testing"
)

func TestPowScalarFixture(t *testing.T) {
	runFixture(t, "pow_scalar", plain(func(c *fixCase, in []*Variable) *Variable { return PowScalar(in[0], c.float("p")) }))
}

func TestPowScalarGradCheck(t *testing.T) {
	for _, p := range []float64{0, 1, 2, 3, 0.5, -1.5} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return PowScalar(xs[0], p) }, absShift(randT(1, 1, 0, 3, 4), 0.3))
		})
	}
}
