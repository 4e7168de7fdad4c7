package tensor

import "testing"

// BenchmarkLayerNormRows runs a GPT block's LayerNorm over [2048, 128]
// (affine), forward keeping the statistics and backward recomputing xhat,
// from operands rotated through 16 sets (32 MB) as in a step.
func BenchmarkLayerNormRows(b *testing.B) {
	const rows, d, sets = 2048, 128, 16
	rng := NewRNG(1)
	type set struct{ x, y, gy, dx []float32 }
	ss := make([]set, sets)
	for i := range ss {
		ss[i] = set{Randn(rng, Float32, rows*d).F32(), make([]float32, rows*d), Randn(rng, Float32, rows*d).F32(), make([]float32, rows*d)}
	}
	w, bb := Randn(rng, Float32, d).F32(), Randn(rng, Float32, d).F32()
	dw, db := make([]float32, d), make([]float32, d)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	b.Run("forward", func(b *testing.B) {
		i := 0
		for b.Loop() {
			s := ss[i%sets]
			LayerNormRowsStats(s.y, mean, rstd, s.x, w, bb, rows, d, 1e-5)
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*d), "ns/elem")
	})
	b.Run("backward", func(b *testing.B) {
		i := 0
		for b.Loop() {
			s := ss[i%sets]
			LayerNormRowsBackwardFromX(s.dx, dw, db, s.gy, s.x, w, mean, rstd, rows, d)
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*d), "ns/elem")
	})
}
