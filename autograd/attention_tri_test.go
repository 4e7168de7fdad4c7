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
// (RoundBF16Slice) and runs the full products, head by head. Where the
// bf16 register kernel takes the head (tensor.GemmTriBF16Native), the
// attention packs instead: the reference then runs tensor.GemmTriBF16 on
// the unrounded operands (TestGemmTriBF16 checks its products), so this
// checks which operands, scales and layouts reach each product.
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
	packs := bf16 && tensor.GemmTriBF16Native(tensor.TriCols, tt, tt, dh) &&
		tensor.GemmTriBF16Native(tensor.TriKEnd, tt, dh, tt) && tensor.GemmTriBF16Native(tensor.TriKStart, tt, dh, tt)
	t.Logf("bf16 products packed by the register kernel: %v", packs)
	gemm := func(mode tensor.TriMode, ta, tb bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		if packs {
			tensor.GemmTriBF16(mode, ta, tb, m, n, k, alpha, tensor.BF16Operand{F: a}, lda, tensor.BF16Operand{F: b}, ldb, c, ldc)
			return
		}
		tensor.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
	}
	round := func(dst, src []float32) {
		if bf16 && !packs {
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
			gemm(tensor.TriCols, false, true, tt, tt, dh, scale, q, ld, k, ld, p, tt)
			tensor.SoftmaxRows(p, nil, tt, tt, true)
			round(pr, p)
			gemm(tensor.TriKEnd, false, false, tt, dh, tt, 1, pr, tt, v, ld, o, e)
			gemm(tensor.TriKStart, true, false, tt, dh, tt, 1, pr, tt, gb, e, dv, ld)
			gemm(tensor.TriCols, false, true, tt, tt, dh, 1, gb, e, v, ld, dp, tt)
			tensor.SoftmaxRowsBackward(dp, p, tt, tt, true)
			round(dp, dp)
			gemm(tensor.TriKEnd, false, false, tt, dh, tt, scale, dp, tt, k, ld, dq, ld)
			gemm(tensor.TriKStart, true, false, tt, dh, tt, scale, dp, tt, q, ld, dk, ld)
		}
	}
	for i, w := range wantY {
		require.Equal(t, math.Float32bits(w), math.Float32bits(y.Value.F32()[i]), "y[%d]", i)
	}
	for i, w := range wantGx {
		require.Equal(t, math.Float32bits(w), math.Float32bits(x.Grad.F32()[i]), "grad[%d]", i)
	}
}
