package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestSelfAttentionFixture(t *testing.T) {
	runFixture(t, "self_attention", plain(func(c *fixCase, in []*Variable) *Variable {
		return SelfAttention(in[0], c.int("heads"), attnOpts(c, in, 1))
	}))
}

func TestSelfAttentionGradCheck(t *testing.T) {
	for _, causal := range []bool{false, true} {
		gradCheck(t, func(xs []*Variable) *Variable {
			return SelfAttention(xs[0], 2, AttentionOptions{Causal: causal})
		}, randT(1, 1, 0, 2, 5, 12))
	}
	gradCheck(t, func(xs []*Variable) *Variable {
		return SelfAttention(xs[0], 3, AttentionOptions{Mask: randT(9, 1, 0, 4, 4), Causal: true, Scale: 0.5})
	}, randT(2, 1, 0, 1, 4, 9))
}

// SelfAttention equals the composition the anchor writes out: split, view
// into heads, transpose, attention, transpose back, reshape.
func TestSelfAttentionMatchesComposition(t *testing.T) {
	const b, tt, e, h = 2, 6, 8, 2
	x1, x2 := Param(randT(3, 1, 0, b, tt, 3*e)), Param(randT(3, 1, 0, b, tt, 3*e))
	fused := SelfAttention(x1, h, AttentionOptions{Causal: true})
	p := Split(x2, e, 2)
	heads := make([]*Variable, 3)
	for i := range p {
		heads[i] = Transpose(Reshape(p[i], b, tt, h, e/h), 1, 2)
	}
	y := ScaledDotProductAttention(heads[0], heads[1], heads[2], AttentionOptions{Causal: true})
	comp := Reshape(Transpose(y, 1, 2), b, tt, e)
	require.InDeltaSlice(t, toF64(comp.Value), toF64(fused.Value), 1e-12)
	w := randT(4, 1, 0, b, tt, e)
	require.NoError(t, fused.BackwardWith(w))
	require.NoError(t, comp.BackwardWith(w))
	require.InDeltaSlice(t, toF64(x2.Grad), toF64(x1.Grad), 1e-12)
}

func TestSelfAttentionBadShapesPanic(t *testing.T) {
	require.Panics(t, func() { SelfAttention(Const(randT(1, 1, 0, 2, 3, 12)), 5, AttentionOptions{}) })
	require.Panics(t, func() { SelfAttention(Const(randT(1, 1, 0, 3, 12)), 2, AttentionOptions{}) })
}

// Under bf16 products, at a GPT head's size (where the attention packs on
// a CPU with the bf16 register kernel), SelfAttention and the composition
// through ScaledDotProductAttention run the same products on the same
// bfloat16 values, forward and backward: the same bits there.
func TestSelfAttentionBF16MatchesComposition(t *testing.T) {
	const b, tt, e, h = 2, 64, 128, 4
	qkv := tensor.Randn(tensor.NewRNG(41), tensor.Float32, b, tt, 3*e)
	x1, x2 := Param(qkv.Clone()), Param(qkv.Clone())
	bf16 := AttentionOptions{Causal: true, Precision: tensor.PrecisionBFloat16}
	fused := SelfAttention(x1, h, bf16)
	p := Split(x2, e, 2)
	heads := make([]*Variable, 3)
	for i := range p {
		heads[i] = Transpose(Reshape(p[i], b, tt, h, e/h), 1, 2)
	}
	comp := Reshape(Transpose(ScaledDotProductAttention(heads[0], heads[1], heads[2], bf16), 1, 2), b, tt, e)
	w := tensor.Randn(tensor.NewRNG(42), tensor.Float32, b, tt, e)
	require.NoError(t, fused.BackwardWith(w))
	require.NoError(t, comp.BackwardWith(w))
	packs := tensor.GemmTriBF16Native(tensor.TriCols, tt, tt, e/h)
	t.Logf("packs: %v", packs)
	tol := 0.0
	if !packs {
		tol = 1e-5 // the float32 fallback's products may sum in another order at other strides
	}
	require.InDeltaSlice(t, toF64(comp.Value), toF64(fused.Value), tol)
	require.InDeltaSlice(t, toF64(x2.Grad), toF64(x1.Grad), tol)
}
