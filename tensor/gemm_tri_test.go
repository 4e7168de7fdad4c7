package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// GemmTri writes, where its mode needs them, the bits Gemm writes, with
// operands shaped as causal attention's: strided heads, probabilities that
// are zero past (TriKEnd) or, transposed, before (TriKStart) the diagonal,
// and the square scores (TriCols), whose masked part is not compared. Sizes
// with rows that do not fill a block, and ones the register kernel does
// not take (the full product then).
func TestGemmTri(t *testing.T) {
	rng := NewRNG(21)
	for _, sz := range []struct{ l, d int }{{64, 32}, {48, 16}, {37, 32}, {64, 64}, {96, 32}, {200, 48}} {
		l, d := sz.l, sz.d
		t.Run(fmt.Sprintf("l=%d,d=%d", l, d), func(t *testing.T) {
			t.Logf("register kernel: %v", engineUsesTri(TriCols, l, l, d))
			ld := 3*d + 5 // a packed [T, 3E] projection's row stride
			q, kv := Randn(rng, Float32, l*ld).F32(), Randn(rng, Float32, l*ld).F32()
			p := Randn(rng, Float32, l*l).F32() // lower triangle: probabilities, row i zero past i
			for i := range l {
				for j := i + 1; j < l; j++ {
					p[i*l+j] = 0
				}
			}
			nan := func(n int) []float32 {
				c := make([]float32, n)
				for i := range c {
					c[i] = float32(math.NaN())
				}
				return c
			}
			// TriCols: S = q·kᵀ·scale, rows i compared in columns j <= i.
			got, want := nan(l*l), nan(l*l)
			GemmTri(TriCols, false, true, l, l, d, 0.125, q, ld, kv, ld, got, l)
			Gemm(false, true, l, l, d, 0.125, q, ld, kv, ld, 0, want, l)
			for i := range l {
				for j := 0; j <= i; j++ {
					require.Equal(t, math.Float32bits(want[i*l+j]), math.Float32bits(got[i*l+j]), "cols [%d][%d]", i, j)
				}
			}
			// TriKEnd: o = p·v; TriKStart: dv = pᵀ·dO.
			for _, tc := range []struct {
				mode TriMode
				ta   bool
			}{{TriKEnd, false}, {TriKStart, true}} {
				got, want := nan(l*ld), nan(l*ld)
				GemmTri(tc.mode, tc.ta, false, l, d, l, 0.5, p, l, kv, ld, got, ld)
				Gemm(tc.ta, false, l, d, l, 0.5, p, l, kv, ld, 0, want, ld)
				for i := range l {
					for j := range ld {
						require.Equal(t, math.Float32bits(want[i*ld+j]), math.Float32bits(got[i*ld+j]), "%v [%d][%d]", tc.mode, i, j)
					}
				}
			}
		})
	}
	require.PanicsWithValue(t, "tensor: GemmTri: mode cols needs a square result, not 4x8", func() {
		GemmTri(TriCols, false, false, 4, 8, 2, 1, make([]float32, 8), 2, make([]float32, 16), 8, make([]float32, 32), 8)
	})
	require.PanicsWithValue(t, "tensor: GemmTri: mode kend needs a square op(A), not 4x2", func() {
		GemmTri(TriKEnd, false, false, 4, 8, 2, 1, make([]float32, 8), 2, make([]float32, 16), 8, make([]float32, 32), 8)
	})
}
