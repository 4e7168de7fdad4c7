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

// GemmTriBF16 forms the products of op(A) and op(B) rounded to bfloat16,
// summed in float32: within float32's rounding of a float64 sum over the
// rounded operands, and visibly off the float32 product of the unrounded
// ones (so a kernel that skipped the rounding fails). Every mode with every
// transposition, strided operands, an odd k, rows that fill no block, and
// shapes the bf16 register kernel does not take (the rounded GemmTri).
// Operands given as bfloat16 (RoundToBF16's halves) give the same bits as
// the float32 ones they round: with even and odd row strides and a start
// at an odd element, which the kernel reads in place or packs.
func TestGemmTriBF16(t *testing.T) {
	rng := NewRNG(23)
	type shape struct {
		mode    TriMode
		m, n, k int
	}
	var shapes []shape
	for _, s := range []struct{ l, d int }{{64, 32}, {48, 33}, {37, 16}, {16, 64}, {128, 48}, {96, 32}} {
		shapes = append(shapes, shape{TriCols, s.l, s.l, s.d}, shape{TriKEnd, s.l, s.d, s.l}, shape{TriKStart, s.l, s.d, s.l})
	}
	native := 0
	for _, sh := range shapes {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			m, n, k := sh.m, sh.n, sh.k
			name := fmt.Sprintf("%v/m=%d,n=%d,k=%d/ta=%v,tb=%v", sh.mode, m, n, k, ta, tb)
			rowsA, colsA := stored(ta, m, k)
			rowsB, colsB := stored(tb, k, n)
			lda, ldb, ldc := colsA+4, colsB+4, n+7
			a, b := Randn(rng, Float32, rowsA*lda).F32(), Randn(rng, Float32, rowsB*ldb).F32()
			opA := func(i, kk int) float32 {
				if ta {
					return a[kk*lda+i]
				}
				return a[i*lda+kk]
			}
			opB := func(kk, j int) float32 {
				if tb {
					return b[j*ldb+kk]
				}
				return b[kk*ldb+j]
			}
			// op(A) zero past (kend) or before (kstart) its diagonal.
			for i := range m {
				for kk := range k {
					if (sh.mode == TriKEnd && kk > i) || (sh.mode == TriKStart && kk < i) {
						if ta {
							a[kk*lda+i] = 0
						} else {
							a[i*lda+kk] = 0
						}
					}
				}
			}
			const alpha = 0.375
			nan := func() []float32 {
				c := make([]float32, m*ldc)
				for i := range c {
					c[i] = float32(math.NaN())
				}
				return c
			}
			got := nan()
			GemmTriBF16(sh.mode, ta, tb, m, n, k, alpha, BF16Operand{F: a}, lda, BF16Operand{F: b}, ldb, got, ldc)
			plain := make([]float32, m*ldc)
			Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0, plain, ldc)
			needed := func(i, j int) bool { return sh.mode != TriCols || j <= i } // cols: the rest may be left unwritten
			worst, offF32 := 0.0, 0.0
			for i := range m {
				for j := range n {
					if !needed(i, j) {
						continue
					}
					ref, mag := 0.0, 0.0
					for kk := range k {
						x := float64(RoundBF16(opA(i, kk))) * float64(RoundBF16(opB(kk, j)))
						ref += x
						mag += math.Abs(x)
					}
					ref, mag = ref*alpha, mag*alpha
					g := float64(got[i*ldc+j])
					require.False(t, math.IsNaN(g), "%s: [%d][%d] not written", name, i, j)
					e := math.Abs(g-ref) / (mag + 1e-30)
					require.LessOrEqual(t, e, float64(k)*0x1p-23, "%s: [%d][%d] = %v, want %v", name, i, j, g, ref)
					worst = max(worst, e)
					offF32 = max(offF32, math.Abs(float64(plain[i*ldc+j])-ref)/(mag+1e-30))
				}
			}
			require.Greater(t, offF32, 50*worst, "%s: the float32 product of the unrounded operands is as close: not rounded to bf16?", name)
			// The same operands as bfloat16, from element 0 and from element 1
			// (a buffer one longer, rounded whole).
			for _, off := range []int{0, 1} {
				halves := func(x []float32) []uint16 {
					return RoundToBF16(append(make([]float32, off), x...), 1, off+len(x)).Halves()[off:]
				}
				got16 := nan()
				GemmTriBF16(sh.mode, ta, tb, m, n, k, alpha, BF16Operand{H: halves(a)}, lda, BF16Operand{H: halves(b)}, ldb, got16, ldc)
				for i := range m {
					for j := range n {
						if needed(i, j) {
							require.Equal(t, math.Float32bits(got[i*ldc+j]), math.Float32bits(got16[i*ldc+j]), "%s: bfloat16 operands from element %d: [%d][%d]", name, off, i, j)
						}
					}
				}
			}
			if GemmTriBF16Native(sh.mode, m, n, k) {
				native++
			}
		}
	}
	t.Logf("%d of %d products on the bf16 register kernel (native bf16: %v)", native, 4*len(shapes), BF16Native())
	if BF16Native() && engineUsesTri(TriCols, 64, 64, 32) {
		require.Positive(t, native, "this CPU has the bf16 register kernel, and no shape ran on it")
	}
	require.PanicsWithValue(t, "tensor: GemmTriBF16: mode kstart needs a square op(A), not 4x2", func() {
		GemmTriBF16(TriKStart, false, false, 4, 8, 2, 1, BF16Operand{F: make([]float32, 8)}, 2, BF16Operand{F: make([]float32, 16)}, 8, make([]float32, 32), 8)
	})
}
