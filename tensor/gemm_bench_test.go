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
