package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestClampFixture(t *testing.T) {
	runFixture(t, "clamp", plain(func(c *fixCase, in []*Variable) *Variable { return Clamp(in[0], c.float("lo"), c.float("hi")) }))
}

func TestClampGradCheck(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
	}{{"both", -0.5, 0.5}, {"lo_only", -0.2, math.Inf(1)}, {"hi_only", math.Inf(-1), 0.3}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := awayFrom(randT(1, 1, 0, 4, 5), 0.02, tc.lo, tc.hi)
			gradCheck(t, func(xs []*Variable) *Variable { return Clamp(xs[0], tc.lo, tc.hi) }, x)
		})
	}
}

func TestClampGradientAtBoundsPasses(t *testing.T) {
	x := Param(tensor.FromF64([]float64{-1, -0.5, 0, 0.5, 1}, 5))
	require.NoError(t, SumAll(Clamp(x, -0.5, 0.5)).Backward())
	require.Equal(t, []float64{0, 1, 1, 1, 0}, x.Grad.F64())
}
