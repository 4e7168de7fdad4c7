package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// attnOpts builds a fixture case's options; a mask is its last input, a
// bool one converted as nn.MultiheadAttention does.
func attnOpts(c *fixCase, in []*Variable, maskAt int) AttentionOptions {
	o := AttentionOptions{Causal: c.bool("causal")}
	if c.has("scale") {
		o.Scale = c.float("scale")
	}
	switch c.Args["mask"] {
	case "float":
		o.Mask = in[maskAt].Value
	case "bool":
		o.Mask = BoolMaskToAdditive(in[maskAt].Value)
	}
	return o
}

func TestScaledDotProductAttentionFixture(t *testing.T) {
	runFixture(t, "sdpa", plain(func(c *fixCase, in []*Variable) *Variable {
		return ScaledDotProductAttention(in[0], in[1], in[2], attnOpts(c, in, 3))
	}))
}

func TestScaledDotProductAttentionGradCheck(t *testing.T) {
	for _, causal := range []bool{false, true} {
		gradCheck(t, func(xs []*Variable) *Variable {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{Causal: causal})
		}, randT(1, 1, 0, 2, 3, 5, 4), randT(2, 1, 0, 2, 3, 6, 4), randT(3, 1, 0, 2, 3, 6, 3))
	}
	mask := randT(4, 1, 0, 2, 1, 5, 6)
	mask.F64()[3] = math.Inf(-1)
	gradCheck(t, func(xs []*Variable) *Variable {
		return ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{Mask: mask, Scale: 0.3})
	}, randT(1, 1, 0, 2, 3, 5, 4), randT(2, 1, 0, 2, 3, 6, 4), randT(3, 1, 0, 2, 3, 6, 3))
	// Strided views in (the heads of a [B, T, H, D] tensor), one input reused.
	gradCheck(t, func(xs []*Variable) *Variable {
		q := Transpose(xs[0], 1, 2)
		return ScaledDotProductAttention(q, q, Transpose(xs[1], 1, 2), AttentionOptions{Causal: true})
	}, randT(5, 1, 0, 2, 4, 3, 2), randT(6, 1, 0, 2, 4, 3, 5))
}

// A fully masked query row is NaN, as in torch, and rows with a key left are
// unaffected.
func TestScaledDotProductAttentionAllMaskedRow(t *testing.T) {
	mask := tensor.New(tensor.Float64, 2, 3)
	for j := 0; j < 3; j++ {
		mask.Set(math.Inf(-1), 1, j)
	}
	y := ScaledDotProductAttention(Const(randT(1, 1, 0, 2, 4)), Const(randT(2, 1, 0, 3, 4)), Const(randT(3, 1, 0, 3, 2)),
		AttentionOptions{Mask: mask})
	require.True(t, math.IsNaN(y.Value.At(1, 0)))
	require.False(t, math.IsNaN(y.Value.At(0, 0)))
}

func TestScaledDotProductAttentionBadShapesPanic(t *testing.T) {
	q, k := Const(randT(1, 1, 0, 2, 4)), Const(randT(2, 1, 0, 3, 4))
	require.Panics(t, func() { ScaledDotProductAttention(q, k, Const(randT(3, 1, 0, 4, 2)), AttentionOptions{}) }, "S mismatch")
	require.Panics(t, func() { ScaledDotProductAttention(q, Const(randT(2, 1, 0, 3, 5)), k, AttentionOptions{}) }, "D mismatch")
	require.Panics(t, func() {
		ScaledDotProductAttention(q, k, k, AttentionOptions{Mask: tensor.New(tensor.Float64, 2, 4)})
	}, "mask does not broadcast")
}

func TestBoolMaskToAdditive(t *testing.T) {
	m := BoolMaskToAdditive(tensor.FromF32([]float32{0, 1, 2, 0}, 2, 2))
	require.Equal(t, []float32{0, float32(math.Inf(-1)), float32(math.Inf(-1)), 0}, m.F32())
}
