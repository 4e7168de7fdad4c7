package tensor

import "testing"

// BenchmarkSmallOps measures per-op overhead at the Linear(20,1) batch-32
// sizes, where fixed costs (headers, allocation, dispatch) dominate.
func BenchmarkSmallOps(b *testing.B) {
	rng := NewRNG(0)
	x, w, bias := Randn(rng, Float32, 32, 20), Randn(rng, Float32, 1, 20), Randn(rng, Float32, 1)
	y, t := Randn(rng, Float32, 32, 1), Randn(rng, Float32, 32, 1)
	out := New(Float32, 32, 1)
	cases := []struct {
		name string
		fn   func()
	}{
		{"MatMul/32x20@20x1", func() { MatMul(x, w.T()) }},
		{"MatMulInto/32x20@20x1", func() { MatMulInto(out, x, w.T()) }},
		{"Add/bias/32x1", func() { Add(y, bias) }},
		{"Sub/32x1", func() { Sub(y, t) }},
		{"MulScalar/32x1", func() { MulScalar(y, 2) }},
		{"SumAll/32x1", func() { SumAll(y) }},
		{"Sum/32x1", func() { Sum(y, nil, false) }},
		{"T", func() { w.T() }},
		{"New/32x1", func() { New(Float32, 32, 1) }},
		{"Axpy/1x20", func() { Axpy(w, -0.01, w) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.fn()
			}
		})
	}
}
