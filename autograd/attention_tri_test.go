package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Causal float32 attention at a head size the register kernel takes (64
// positions, 32 features) skips the masked half of its products
// (tensor.GemmTri); its output and its input gradient must keep the bits
// of the full products (tensor.Gemm), the causal softmax and its backward,
// run here head by head as the attention did before.
func TestCausalAttentionSkipsTheMaskedHalf(t *testing.T) {
	checkCausalHeads(t, tensor.PrecisionFloat32)
}

// Under bf16 products the causal attention also rounds only the
// probabilities and score gradients its mask leaves
// (tensor.RoundBF16Causal): the reference rounds every operand whole
// (RoundBF16Slice) and runs the full products, head by head.
func TestCausalBF16AttentionRoundsWhatTheMaskLeaves(t *testing.T) {
	checkCausalHeads(t, tensor.PrecisionBFloat16)
}

// checkCausalHeads compares causal SelfAttention of [2, 64, 3·128] with 4
// heads, forward and backward, bit for bit against the full products head
// by head, every operand rounded whole under bf16.
func checkCausalHeads(t *testing.T, prec tensor.Precision) {
	const b, tt, e, heads = 2, 64, 128, 4
	dh, ld := e/heads, 3*e
	qkv := tensor.Randn(tensor.NewRNG(31), tensor.Float32, b, tt, 3*e)
	gy := tensor.Randn(tensor.NewRNG(32), tensor.Float32, b, tt, e)
	x := Param(qkv.Clone())
	y := SelfAttention(x, heads, AttentionOptions{Causal: true, Precision: prec})
	require.NoError(t, y.BackwardWith(gy))

	bf16 := prec == tensor.PrecisionBFloat16
	round := func(dst, src []float32) {
		if bf16 {
			tensor.RoundBF16Slice(dst, src)
		} else {
			copy(dst, src)
		}
	}
	scale := float32(1 / math.Sqrt(float64(dh)))
	xs, g := make([]float32, qkv.Numel()), make([]float32, gy.Numel())
	round(xs, qkv.F32())
	round(g, gy.F32())
	wantY, wantGx := make([]float32, b*tt*e), make([]float32, b*tt*3*e)
	p, pr, dp := make([]float32, tt*tt), make([]float32, tt*tt), make([]float32, tt*tt)
	for bb := range b {
		for h := range heads {
			q := xs[bb*tt*ld+h*dh:]
			k, v := q[e:], q[2*e:]
			o, gb := wantY[bb*tt*e+h*dh:], g[bb*tt*e+h*dh:]
			dq := wantGx[bb*tt*ld+h*dh:]
			dk, dv := dq[e:], dq[2*e:]
			tensor.Gemm(false, true, tt, tt, dh, scale, q, ld, k, ld, 0, p, tt)
			tensor.SoftmaxRows(p, nil, tt, tt, true)
			round(pr, p)
			tensor.Gemm(false, false, tt, dh, tt, 1, pr, tt, v, ld, 0, o, e)
			tensor.Gemm(true, false, tt, dh, tt, 1, pr, tt, gb, e, 0, dv, ld)
			tensor.Gemm(false, true, tt, tt, dh, 1, gb, e, v, ld, 0, dp, tt)
			tensor.SoftmaxRowsBackward(dp, p, tt, tt, true)
			round(dp, dp)
			tensor.Gemm(false, false, tt, dh, tt, scale, dp, tt, k, ld, 0, dq, ld)
			tensor.Gemm(true, false, tt, dh, tt, scale, dp, tt, q, ld, 0, dk, ld)
		}
	}
	for i, w := range wantY {
		require.Equal(t, math.Float32bits(w), math.Float32bits(y.Value.F32()[i]), "y[%d]", i)
	}
	for i, w := range wantGx {
		require.Equal(t, math.Float32bits(w), math.Float32bits(x.Grad.F32()[i]), "grad[%d]", i)
	}
}
