package tensor

// The host's Gemm and GemmStridedBatched entries: Gemm and Gemm64 (the C
// engine's BLAS) on the operands' elements from where each tensor starts,
// float64 operands included (the gradient checks).

func cpuGemm(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda int,
	b *Tensor, ldb int, beta float32, c *Tensor, ldc int) {
	if c.dtype == Float64 {
		Gemm64(transA, transB, m, n, k, float64(alpha), f64s(a), lda, f64s(b), ldb, float64(beta), f64s(c), ldc)
		return
	}
	Gemm(transA, transB, m, n, k, alpha, f32s(a), lda, f32s(b), ldb, beta, f32s(c), ldc)
}

// cpuGemmStridedBatched is one Gemm per matrix, as the host's batched
// products always ran.
func cpuGemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda, strideA int,
	b *Tensor, ldb, strideB int, beta float32, c *Tensor, ldc, strideC, batch int) {
	if c.dtype == Float64 {
		av, bv, cv := f64s(a), f64s(b), f64s(c)
		for i := range batch {
			Gemm64(transA, transB, m, n, k, float64(alpha), av[i*strideA:], lda, bv[i*strideB:], ldb, float64(beta), cv[i*strideC:], ldc)
		}
		return
	}
	av, bv, cv := f32s(a), f32s(b), f32s(c)
	for i := range batch {
		Gemm(transA, transB, m, n, k, alpha, av[i*strideA:], lda, bv[i*strideB:], ldb, beta, cv[i*strideC:], ldc)
	}
}
