package tensor

import (
	"fmt"
	"testing"
)

// BenchmarkGemmSmall measures where the plain Go loop stops beating a call
// into the engine; smallGemmWork is set from it.
func BenchmarkGemmSmall(b *testing.B) {
	shapes := []struct{ m, n, k int }{
		{2, 3, 4}, {4, 4, 4}, {8, 8, 8}, {32, 1, 20}, {1, 20, 32}, {16, 16, 16}, {32, 32, 8},
	}
	for _, s := range shapes {
		for _, tb := range []bool{false, true} {
			ldb := s.n
			if tb {
				ldb = s.k
			}
			a := make([]float32, s.m*s.k)
			bm := make([]float32, s.k*s.n)
			c := make([]float32, s.m*s.n)
			for _, path := range []string{"go", "engine"} {
				b.Run(fmt.Sprintf("m=%d,n=%d,k=%d,tB=%v/%s", s.m, s.n, s.k, tb, path), func(b *testing.B) {
					for b.Loop() {
						if path == "go" {
							smallGemm32(false, tb, s.m, s.n, s.k, 1, a, s.k, bm, ldb, 0, c, s.n)
						} else {
							engineSgemm(false, tb, s.m, s.n, s.k, 1, a, s.k, bm, ldb, 0, c, s.n)
						}
					}
					b.ReportMetric(float64(2*s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
				})
			}
		}
	}
}

// BenchmarkGemmTriBF16 runs causal attention's three kinds of product at a
// GPT head's size (64 positions, 32 features, heads strided in a packed
// [T, 3E] projection), float32 (GemmTri) against bf16 (GemmTriBF16), with
// the operands in cache. GFLOPS counts the full products, as
// -kernel-profile does.
func BenchmarkGemmTriBF16(b *testing.B) {
	const l, d, ld = 64, 32, 3 * 128
	rng := NewRNG(5)
	qkv, p, c := Randn(rng, Float32, l*ld).F32(), Randn(rng, Float32, l*l).F32(), make([]float32, l*ld)
	for _, pc := range []struct {
		name     string
		mode     TriMode
		ta, tb   bool
		m, n, k  int
		a        []float32
		lda, ldb int
	}{
		{"scores NT", TriCols, false, true, l, l, d, qkv, ld, ld},
		{"p·v NN", TriKEnd, false, false, l, d, l, p, l, ld},
		{"pᵀ·dO TN", TriKStart, true, false, l, d, l, p, l, ld},
	} {
		for _, bf := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/bf16=%v", pc.name, bf), func(b *testing.B) {
				for b.Loop() {
					if bf {
						GemmTriBF16(pc.mode, pc.ta, pc.tb, pc.m, pc.n, pc.k, 1, BF16Operand{F: pc.a}, pc.lda, BF16Operand{F: qkv[128:]}, pc.ldb, c, ld)
					} else {
						GemmTri(pc.mode, pc.ta, pc.tb, pc.m, pc.n, pc.k, 1, pc.a, pc.lda, qkv[128:], pc.ldb, c, ld)
					}
				}
				b.ReportMetric(float64(2*pc.m*pc.n*pc.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}
