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
	const b, tt, e, heads = 2, 64, 128, 4
	dh, ld := e/heads, 3*e
	qkv := tensor.Randn(tensor.NewRNG(31), tensor.Float32, b, tt, 3*e)
	gy := tensor.Randn(tensor.NewRNG(32), tensor.Float32, b, tt, e)
	x := Param(qkv)
	y := SelfAttention(x, heads, AttentionOptions{Causal: true})
	require.NoError(t, y.BackwardWith(gy))

	scale := float32(1 / math.Sqrt(float64(dh)))
	xs, g := qkv.F32(), gy.F32()
	wantY, wantGx := make([]float32, b*tt*e), make([]float32, b*tt*3*e)
	p, dp := make([]float32, tt*tt), make([]float32, tt*tt)
	for bb := range b {
		for h := range heads {
			q := xs[bb*tt*ld+h*dh:]
			k, v := q[e:], q[2*e:]
			o, gb := wantY[bb*tt*e+h*dh:], g[bb*tt*e+h*dh:]
			dq := wantGx[bb*tt*ld+h*dh:]
			dk, dv := dq[e:], dq[2*e:]
			tensor.Gemm(false, true, tt, tt, dh, scale, q, ld, k, ld, 0, p, tt)
			tensor.SoftmaxRows(p, nil, tt, tt, true)
			tensor.Gemm(false, false, tt, dh, tt, 1, p, tt, v, ld, 0, o, e)
			tensor.Gemm(true, false, tt, dh, tt, 1, p, tt, gb, e, 0, dv, ld)
			tensor.Gemm(false, true, tt, tt, dh, 1, gb, e, v, ld, 0, dp, tt)
			tensor.SoftmaxRowsBackward(dp, p, tt, tt, true)
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

// Under bf16 products the causal attention also rounds only the
// probabilities and score gradients its mask leaves
// (tensor.RoundBF16Causal): the reference rounds every operand whole
// (RoundBF16Slice) and runs the full products, head by head.
func TestCausalBF16AttentionRoundsWhatTheMaskLeaves(t *testing.T) {
	const b, tt, e, heads = 2, 64, 128, 4
	dh, ld := e/heads, 3*e
	qkv := tensor.Randn(tensor.NewRNG(33), tensor.Float32, b, tt, 3*e)
	gy := tensor.Randn(tensor.NewRNG(34), tensor.Float32, b, tt, e)
	x := Param(qkv.Clone())
	y := SelfAttention(x, heads, AttentionOptions{Causal: true, Precision: tensor.PrecisionBFloat16})
	require.NoError(t, y.BackwardWith(gy))

	scale := float32(1 / math.Sqrt(float64(dh)))
	xs, g := make([]float32, qkv.Numel()), make([]float32, gy.Numel())
	tensor.RoundBF16Slice(xs, qkv.F32())
	tensor.RoundBF16Slice(g, gy.F32())
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
			tensor.RoundBF16Slice(pr, p)
			tensor.Gemm(false, false, tt, dh, tt, 1, pr, tt, v, ld, 0, o, e)
			tensor.Gemm(true, false, tt, dh, tt, 1, pr, tt, gb, e, 0, dv, ld)
			tensor.Gemm(false, true, tt, tt, dh, 1, gb, e, v, ld, 0, dp, tt)
			tensor.SoftmaxRowsBackward(dp, p, tt, tt, true)
			tensor.RoundBF16Slice(dp, dp)
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
