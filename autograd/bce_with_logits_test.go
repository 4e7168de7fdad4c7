package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestBCEWithLogitsFixture(t *testing.T) {
	runFixture(t, "bce_with_logits", plain(func(c *fixCase, in []*Variable) *Variable {
		return BCEWithLogits(in[0], in[1], c.reduction())
	}))
}

func TestBCEWithLogitsGradCheck(t *testing.T) {
	for _, r := range []Reduction{ReductionMean, ReductionSum, ReductionNone} {
		t.Run(r.String(), func(t *testing.T) {
			tgt := randT(2, 0.3, 0.5, 3, 4)
			gradCheck(t, func(xs []*Variable) *Variable { return BCEWithLogits(xs[0], xs[1], r) },
				randT(1, 2, 0, 3, 4), tgt)
		})
	}
}

func TestBCEWithLogitsStable(t *testing.T) {
	x := Param(tensor.FromF32([]float32{200, -200}, 2))
	y := Const(tensor.FromF32([]float32{0, 1}, 2))
	loss := BCEWithLogits(x, y, ReductionNone)
	got := loss.Value.F32()
	require.False(t, math.IsInf(float64(got[0]), 0) || math.IsNaN(float64(got[0])))
	require.InDelta(t, 200, got[0], 1e-3)
	require.InDelta(t, 200, got[1], 1e-3)
}
