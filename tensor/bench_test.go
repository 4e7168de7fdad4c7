package tensor

import (
	"fmt"
	"testing"
)

// Benchmarks read mechanically by the project's scripts: keep the names.
// Run with GODDP_NUM_THREADS set (2 for MatMul, 1 for the MLP shapes, to
// compare with scripts/bench_torch_gemm.py).

func gflops(b *testing.B, flopsPerOp float64) {
	b.ReportMetric(flopsPerOp*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
}

// BenchmarkMatMul is square float32 MatMul into a reused output (torch.mm
// with out=, as the torch script measures).
func BenchmarkMatMul(b *testing.B) {
	SetThreads(ThreadsFromEnv())
	rng := NewRNG(0)
	for _, n := range []int{256, 512, 1024} {
		x, y, out := Rand(rng, Float32, n, n), Rand(rng, Float32, n, n), New(Float32, n, n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			MatMulInto(out, x, y)
			for b.Loop() {
				MatMulInto(out, x, y)
			}
			gflops(b, 2*float64(n)*float64(n)*float64(n))
		})
	}
}

// mlpGemmShapes are the GEMMs of one training step of the 784-512-512-10
// MLP at batch 64: forward x·Wᵀ, backward dX = dY·W and dW = dYᵀ·X.
var mlpGemmShapes = []struct {
	name           string
	m, k, n        int
	transA, transB bool
}{
	{"fwd/64x784x512", 64, 784, 512, false, true},
	{"fwd/64x512x512", 64, 512, 512, false, true},
	{"fwd/64x512x10", 64, 512, 10, false, true},
	{"dX/64x512x784", 64, 512, 784, false, false},
	{"dX/64x512x512", 64, 512, 512, false, false},
	{"dX/64x10x512", 64, 10, 512, false, false},
	{"dW/512x64x784", 512, 64, 784, true, false},
	{"dW/512x64x512", 512, 64, 512, true, false},
	{"dW/10x64x512", 10, 64, 512, true, false},
}

// convnetGemmShapes are the GEMMs of the Fashion-MNIST convnet's two Linear
// layers (3136->1024->10) at batch 64, forward, dX and dW as above.
var convnetGemmShapes = []struct {
	name           string
	m, k, n        int
	transA, transB bool
}{
	{"fwd/64x3136x1024", 64, 3136, 1024, false, true},
	{"fwd/64x1024x10", 64, 1024, 10, false, true},
	{"dX/64x1024x3136", 64, 1024, 3136, false, false},
	{"dX/64x10x1024", 64, 10, 1024, false, false},
	{"dW/1024x64x3136", 1024, 64, 3136, true, false},
	{"dW/10x64x1024", 10, 64, 1024, true, false},
}

// BenchmarkGemmMLP runs Gemm at the MLP's shapes (set GODDP_NUM_THREADS=1
// to compare with torch at 1 thread).
func BenchmarkGemmMLP(b *testing.B) { benchGemmShapes(b, mlpGemmShapes) }

// BenchmarkGemmConvNet runs Gemm at the convnet's Linear shapes.
func BenchmarkGemmConvNet(b *testing.B) { benchGemmShapes(b, convnetGemmShapes) }

func benchGemmShapes(b *testing.B, shapes []struct {
	name           string
	m, k, n        int
	transA, transB bool
}) {
	SetThreads(ThreadsFromEnv())
	b.Logf("BLAS core: %s", BLASCore())
	rng := NewRNG(0)
	for _, s := range shapes {
		a, bm, c := Rand(rng, Float32, s.m*s.k).F32(), Rand(rng, Float32, s.k*s.n).F32(), make([]float32, s.m*s.n)
		lda, ldb := s.k, s.n
		if s.transA {
			lda = s.m
		}
		if s.transB {
			ldb = s.k
		}
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				Gemm(s.transA, s.transB, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
			}
			gflops(b, 2*float64(s.m*s.n*s.k))
		})
	}
}

// BenchmarkElementwise covers the MLP's non-GEMM work at batch 64.
func BenchmarkElementwise(b *testing.B) {
	rng := NewRNG(0)
	x, y, bias := Randn(rng, Float32, 64, 512), Randn(rng, Float32, 64, 512), Randn(rng, Float32, 512)
	logits := Randn(rng, Float32, 64, 10)
	cases := []struct {
		name string
		fn   func()
	}{
		{"Add/64x512", func() { Add(x, y) }},
		{"Add/bias/64x512", func() { Add(x, bias) }},
		{"AddInto/bias/64x512", func() { AddInto(y, bias) }},
		{"Mul/64x512", func() { Mul(x, y) }},
		{"ReLU/64x512", func() { ReLU(x) }},
		{"GELU/64x512", func() { GELU(x) }},
		{"Exp/64x512", func() { Exp(x) }},
		{"Sum/axis0/64x512", func() { Sum(x, []int{0}, false) }},
		{"LogSoftmax/64x10", func() { LogSoftmax(logits, 1) }},
		{"Axpy/64x512", func() { Axpy(y, 0.01, x) }},
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
