//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// bf16Tolerance is how far two float32 sums of the same k+1 exact terms
// (bf16 products are exact in float32) may differ for their order alone,
// per element of C: (k+2)·2⁻²³·Σ|terms|, doubled for cuBLAS's split
// reductions.
func bf16Tolerance(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int,
	beta float32, c []float32, ldc int) []float64 {
	at := func(i, p int) float64 {
		if transA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if transB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	tol := make([]float64, len(c))
	for i := range m {
		for j := range n {
			v := math.Abs(float64(beta) * float64(c[i*ldc+j]))
			for p := range k {
				v += math.Abs(float64(alpha) * at(i, p) * bt(p, j))
			}
			tol[i*ldc+j] = 2 * float64(k+2) / (1 << 23) * v
		}
	}
	return tol
}

// The GPU's bf16 GEMM (Kernels.GemmBF16: f32_to_bf16, then cuBLAS's
// cublasGemmEx with bfloat16 A and B, float32 C and CUBLAS_COMPUTE_32F)
// gives the CPU's tensor.GemmBF16 on odd shapes, every transpose, padded
// row strides, alpha and beta, up to the order of the float32 sums; where
// bf16 rounding matters it differs from the float32 GEMM by more. Then a
// Linear under bf16 autocast, forward and backward, against the CPU's.
func TestGPUGemmBF16(t *testing.T) {
	c := newContext(t)
	require.GreaterOrEqual(t, c.Info().CUBLASVersion, 110000, "cuBLAS 11 or later has the bf16 GEMM (cublasGemmEx with CUDA_R_16BF)")
	dev := c.Tensors()
	k := dev.Kernels()
	require.NotNil(t, k.GemmBF16)
	rng := tensor.NewRNG(31)
	type gemmCase struct {
		tA, tB        bool
		m, n, kk, pad int
		alpha, beta   float32
	}
	var cases []gemmCase
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			cases = append(cases, gemmCase{tA, tB, 7, 13, 33, 0, 1, 0}, gemmCase{tA, tB, 1, 17, 129, 3, 0.5, 1},
				gemmCase{tA, tB, 31, 1, 5, 1, -2, 0.25}, gemmCase{tA, tB, 65, 47, 300, 2, 1, 1}, gemmCase{tA, tB, 256, 128, 512, 0, 1, 0})
		}
	}
	for _, cs := range cases {
		t.Run(fmt.Sprintf("%+v", cs), func(t *testing.T) {
			ar, ac, br, bc := cs.m, cs.kk, cs.kk, cs.n
			if cs.tA {
				ar, ac = ac, ar
			}
			if cs.tB {
				br, bc = bc, br
			}
			lda, ldb, ldc := ac+cs.pad, bc+cs.pad, cs.n+cs.pad
			a := tensor.Randn(rng, tensor.Float32, ar*lda).F32()
			b := tensor.Randn(rng, tensor.Float32, br*ldb).F32()
			cc := tensor.Randn(rng, tensor.Float32, cs.m*ldc).F32()
			want := append([]float32(nil), cc...)
			tensor.GemmBF16(cs.tA, cs.tB, cs.m, cs.n, cs.kk, cs.alpha, a, lda, b, ldb, cs.beta, want, ldc)
			f32 := append([]float32(nil), cc...)
			tensor.Gemm(cs.tA, cs.tB, cs.m, cs.n, cs.kk, cs.alpha, a, lda, b, ldb, cs.beta, f32, ldc)
			dc := tensor.FromF32(cc, len(cc)).MustTo(dev)
			k.GemmBF16(cs.tA, cs.tB, cs.m, cs.n, cs.kk, cs.alpha, tensor.FromF32(a, len(a)).MustTo(dev), lda,
				tensor.FromF32(b, len(b)).MustTo(dev), ldb, cs.beta, dc, ldc)
			got := dc.MustTo(tensor.CPU()).F32()
			tol := bf16Tolerance(cs.tA, cs.tB, cs.m, cs.n, cs.kk, cs.alpha, a, lda, b, ldb, cs.beta, cc, ldc)
			farther := 0
			for i := range got {
				if i%ldc >= cs.n {
					require.Equal(t, cc[i], got[i], "element %d is in C's padding: untouched", i)
					continue
				}
				d := math.Abs(float64(got[i]) - float64(want[i]))
				require.LessOrEqual(t, d, tol[i], "element %d (row %d, column %d): GPU %v, CPU %v", i, i/ldc, i%ldc, got[i], want[i])
				if math.Abs(float64(f32[i])-float64(want[i])) > 2*tol[i] {
					farther++
				}
			}
			require.Positive(t, farther, "the float32 product should differ from the bf16 one beyond the tolerance somewhere")
		})
	}

	x, w, bias := tensor.Randn(rng, tensor.Float32, 37, 70), tensor.Randn(rng, tensor.Float32, 23, 70), tensor.Randn(rng, tensor.Float32, 23)
	gy := tensor.Randn(rng, tensor.Float32, 37, 23)
	linear := func(d tensor.Device) []*tensor.Tensor {
		vs := []*autograd.Variable{autograd.Param(x.Clone().MustTo(d)), autograd.Param(w.Clone().MustTo(d)), autograd.Param(bias.Clone().MustTo(d))}
		y := autograd.LinearWith(vs[0], vs[1], vs[2], tensor.PrecisionBFloat16)
		require.NoError(t, y.BackwardWith(gy.MustTo(d)))
		return []*tensor.Tensor{y.Value.MustTo(tensor.CPU()), vs[0].Grad.MustTo(tensor.CPU()), vs[1].Grad.MustTo(tensor.CPU())}
	}
	want, got := linear(tensor.CPU()), linear(dev)
	for i, what := range []string{"bf16 linear", "its input gradient", "its weight gradient"} {
		closeTo(t, want[i], got[i], 1e-4, what)
	}
}
