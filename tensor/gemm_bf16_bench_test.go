package tensor

import (
	"fmt"
	"testing"
)

// BenchmarkGemmBF16 compares the bf16 product with the float32 one at the
// same shapes, in GFLOPS (the bf16 figure counts the same 2mnk flops).
func BenchmarkGemmBF16(b *testing.B) {
	for _, s := range []struct {
		tb      bool
		m, n, k int
	}{{false, 256, 256, 256}, {false, 512, 512, 512}, {false, 1024, 1024, 1024}, {true, 2048, 768, 256}, {false, 2048, 256, 768}} {
		rng := NewRNG(1)
		x := rng.Normal(Float32, 0, 1, s.m*s.k).F32()
		w := rng.Normal(Float32, 0, 1, s.k*s.n).F32()
		c := make([]float32, s.m*s.n)
		ldb := s.n
		if s.tb {
			ldb = s.k
		}
		for _, p := range []Precision{PrecisionFloat32, PrecisionBFloat16} {
			b.Run(fmt.Sprintf("%s/tb=%v/%dx%dx%d", p, s.tb, s.m, s.n, s.k), func(b *testing.B) {
				if p == PrecisionBFloat16 {
					b.Logf("native %v, oneDNN slice impl %q", BF16Native(), bf16Impl(false, s.tb, s.m, s.n, s.k, s.k, ldb, s.n))
				}
				g := gemmFor(p)
				for b.Loop() {
					g(false, s.tb, s.m, s.n, s.k, 1, x, s.k, w, ldb, 0, c, s.n)
				}
				b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}

// gemmFor returns the float32 product of precision p.
func gemmFor(p Precision) func(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int) {
	if p == PrecisionBFloat16 {
		return GemmBF16
	}
	return Gemm
}
