//go:build cuda

package cuda_test

import (
	"fmt"
	"testing"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// BenchmarkGPUGemmShapes times the products of examples/gpt at batch 256
// and examples/cnn at batch 512 (row-major m×n×k, transposes as
// Kernels.Gemm takes them) back to back on the compute stream, so that a
// shape cuBLAS runs badly shows against its neighbours and against torch's
// figures for the same shapes (scripts/gpu-kit-run.sh's GPU_KIT_PROFILE).
func BenchmarkGPUGemmShapes(b *testing.B) {
	c, err := cuda.NewContext(0)
	if err != nil {
		b.Skipf("no GPU: %v", err)
	}
	defer c.Close()
	dev := c.Tensors()
	k := dev.Kernels()
	for _, s := range []struct {
		tA, tB  bool
		m, n, k int
		bf16    bool
	}{
		{false, true, 16384, 384, 128, false},
		{false, true, 16384, 512, 128, false},
		{false, true, 16384, 128, 512, false},
		{false, true, 16384, 76, 128, false},
		{true, false, 76, 128, 16384, false},
		{true, false, 384, 128, 16384, false},
		{false, true, 512, 10, 1024, false},
		{false, true, 512, 1024, 3136, false},
		{false, false, 512, 3136, 1024, false},
		{false, true, 512, 10, 1024, true},
		{false, false, 32, 401408, 25, true},
		{false, false, 64, 20776, 800, true},
	} {
		name := fmt.Sprintf("%s%s_%dx%dx%d", map[bool]string{false: "N", true: "T"}[s.tA], map[bool]string{false: "N", true: "T"}[s.tB], s.m, s.n, s.k)
		if s.bf16 {
			name += "_bf16"
		}
		b.Run(name, func(b *testing.B) {
			lda, ldb := s.k, s.n
			if s.tA {
				lda = s.m
			}
			if s.tB {
				ldb = s.k
			}
			a := tensor.Zeros(tensor.Float32, s.m*s.k).MustTo(dev)
			bb := tensor.Zeros(tensor.Float32, s.k*s.n).MustTo(dev)
			cc := tensor.Zeros(tensor.Float32, s.m*s.n).MustTo(dev)
			gemm := k.Gemm
			if s.bf16 {
				gemm = k.GemmBF16
			}
			gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, cc, s.n)
			if err := dev.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, cc, s.n)
			}
			if err := dev.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}
