package autograd

import (
	"math"
	"testing"

	"github.com/goddp/goddp/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelfAttentionBF16Products: with Precision bfloat16 both products take
// bfloat16 operands (q and k for the scores; the probabilities and v for
// the output) with float32 accumulation, and the softmax stays float32.
// The reference rounds exactly those operands and computes the rest in
// float64; float32 attention differs from it by bfloat16's rounding, which
// the test requires to be visible, so that it cannot pass on float32
// products. The gradient goes through the same products.
func TestSelfAttentionBF16Products(t *testing.T) {
	const b, tt, heads, dh = 2, 9, 2, 16
	e := heads * dh
	rng := tensor.NewRNG(11)
	qkv := rng.Uniform(tensor.Float32, -1, 1, b, tt, 3*e)
	x := qkv.F32()
	rb := func(v float64) float64 { return float64(tensor.RoundBF16(float32(v))) }
	scale := 1 / math.Sqrt(dh)
	ref := make([]float64, b*tt*e)
	for bb := range b {
		for h := range heads {
			at := func(tok, part, d int) float64 { return float64(x[(bb*tt+tok)*3*e+part*e+h*dh+d]) }
			for i := range tt {
				p := make([]float64, i+1) // causal: keys 0..i
				m := math.Inf(-1)
				for j := range p {
					s := 0.0
					for d := range dh {
						s += rb(at(i, 0, d)) * rb(at(j, 1, d))
					}
					p[j] = float64(float32(s * scale))
					m = max(m, p[j])
				}
				sum := 0.0
				for j := range p {
					p[j] = math.Exp(p[j] - m)
					sum += p[j]
				}
				for d := range dh {
					o := 0.0
					for j := range p {
						o += rb(float64(float32(p[j]/sum))) * rb(at(j, 2, d))
					}
					ref[(bb*tt+i)*e+h*dh+d] = o
				}
			}
		}
	}
	maxDiff := func(y *tensor.Tensor) float64 {
		d := 0.0
		for i, v := range y.F32() {
			d = max(d, math.Abs(float64(v)-ref[i]))
		}
		return d
	}
	in16, in32 := Param(qkv.Clone()), Param(qkv.Clone())
	y16 := SelfAttention(in16, heads, AttentionOptions{Causal: true, Precision: tensor.PrecisionBFloat16})
	y32 := SelfAttention(in32, heads, AttentionOptions{Causal: true})
	d16, d32 := maxDiff(y16.Value), maxDiff(y32.Value)
	t.Logf("largest difference from the bf16-operand reference: bf16 products %.3g, float32 products %.3g", d16, d32)
	assert.Less(t, d16, 2e-5, "bf16 attention against the reference")
	assert.Greater(t, d32, 20*d16, "float32 products must be visibly off the bf16 reference")

	// Backward through the bf16 products: close to float32's gradient, at
	// bfloat16's precision, and not equal to it.
	SumAll(y16).Backward()
	SumAll(y32).Backward()
	g16, g32 := in16.Grad.F32(), in32.Grad.F32()
	require.Len(t, g16, len(g32))
	worst, differ := 0.0, false
	for i := range g32 {
		worst = max(worst, math.Abs(float64(g16[i]-g32[i])))
		differ = differ || g16[i] != g32[i]
	}
	assert.True(t, differ, "the gradient of bf16 attention equals float32's: the backward products were not lowered")
	assert.Less(t, worst, 3e-2, "bf16 gradient within bfloat16's precision of float32's")
}
