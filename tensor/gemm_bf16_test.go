package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// refGemmBF16 is C = alpha*op(A)op(B) + beta*C over the bf16-rounded
// operands, in float64.
func refGemmBF16(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if ta {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tb {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(RoundBF16(av)) * float64(RoundBF16(bv))
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func TestGemmBF16(t *testing.T) {
	rng := NewRNG(5)
	for _, tc := range []struct {
		ta, tb      bool
		m, n, k     int
		alpha, beta float32
	}{
		{false, false, 3, 5, 7, 1, 0},
		{false, true, 64, 96, 80, 1, 0},
		{true, false, 96, 64, 128, 1, 1},
		{true, true, 33, 47, 65, 0.5, 2},
		{false, true, 256, 384, 256, 1, 1}, // large enough to be cut into slices
		{false, false, 1, 300, 500, 1, 0},
	} {
		t.Run(fmt.Sprintf("%v%v_%dx%dx%d_a%g_b%g", tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, tc.beta), func(t *testing.T) {
			lda, ldb, ldc := tc.k+3, tc.n+1, tc.n+2
			if tc.ta {
				lda = tc.m + 3
			}
			if tc.tb {
				ldb = tc.k + 1
			}
			rowsA, rowsB := tc.m, tc.k
			if tc.ta {
				rowsA = tc.k
			}
			if tc.tb {
				rowsB = tc.n
			}
			a := rng.Normal(Float32, 0, 1, rowsA*lda).F32()
			b := rng.Normal(Float32, 0, 1, rowsB*ldb).F32()
			c := rng.Normal(Float32, 0, 1, tc.m*ldc).F32()
			want := refGemmBF16(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
			got := append([]float32(nil), c...)
			GemmBF16(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, got, ldc)
			f32 := append([]float32(nil), c...)
			Gemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, f32, ldc)
			var maxErr, maxF32Diff float64
			for i := range tc.m {
				for j := range tc.n {
					// float32 accumulation of k exact products: error about k*eps*|terms|.
					tol := 1e-5 * math.Sqrt(float64(tc.k)) * (1 + math.Abs(want[i*tc.n+j]))
					d := math.Abs(float64(got[i*ldc+j]) - want[i*tc.n+j])
					require.LessOrEqual(t, d, tol, "C[%d,%d] = %v, want %v", i, j, got[i*ldc+j], want[i*tc.n+j])
					maxErr = max(maxErr, d)
					maxF32Diff = max(maxF32Diff, math.Abs(float64(f32[i*ldc+j]-got[i*ldc+j])))
				}
				for j := tc.n; j < ldc; j++ {
					require.Equal(t, c[i*ldc+j], got[i*ldc+j], "C's padding column %d was written", j)
				}
			}
			// bf16 keeps 8 significant bits: the float32 product must differ
			// by far more than float32 rounding, or nothing was rounded.
			require.Greater(t, maxF32Diff, 1e-3, "GemmBF16 equals the float32 product: the operands were not rounded")
			t.Logf("max error against the rounded reference %.2g; against float32 %.2g; native %v", maxErr, maxF32Diff, BF16Native())
		})
	}
}

func TestRoundBF16(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1},
		{1 + 1.0/256, 1},                      // a tie rounds to even (down)
		{1 + 3.0/256, 1 + 4.0/256},            // a tie rounds to even (up)
		{1 + 1.0/256 + 1.0/4096, 1 + 2.0/256}, // above the tie rounds up
		{-3.14159, -3.140625},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{math.MaxFloat32, float32(math.Inf(1))}, // rounds past the largest bf16
	} {
		require.Equal(t, tc.want, RoundBF16(tc.in), "RoundBF16(%v)", tc.in)
	}
	require.True(t, math.IsNaN(float64(RoundBF16(float32(math.NaN())))))
}

// RoundBF16Causal rounds each row's first i+1 entries as RoundBF16Slice
// does and writes nothing past them, in place and into another slice, with
// more columns than rows and more rows than columns.
func TestRoundBF16Causal(t *testing.T) {
	for _, sh := range []struct{ l, s int }{{5, 9}, {9, 5}, {64, 64}} {
		src := Randn(NewRNG(41), Float32, sh.l*sh.s).F32()
		want := make([]float32, len(src))
		RoundBF16Slice(want, src)
		dst := make([]float32, len(src))
		for i := range dst {
			dst[i] = 7
		}
		in := append([]float32(nil), src...)
		RoundBF16Causal(dst, src, sh.l, sh.s)
		RoundBF16Causal(in, in, sh.l, sh.s)
		for i := range sh.l {
			for j := range sh.s {
				k := i*sh.s + j
				if j <= i {
					require.Equal(t, want[k], dst[k], "[%d][%d]", i, j)
					require.Equal(t, want[k], in[k], "in place [%d][%d]", i, j)
				} else {
					require.Equal(t, float32(7), dst[k], "[%d][%d] written", i, j)
					require.Equal(t, src[k], in[k], "in place [%d][%d] written", i, j)
				}
			}
		}
	}
	require.Panics(t, func() { RoundBF16Causal(make([]float32, 5), make([]float32, 6), 2, 3) })
}
