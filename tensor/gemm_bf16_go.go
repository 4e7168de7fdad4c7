//go:build !cgo || noblas

package tensor

func bf16Native() bool { return false }

// engineGemmBF16 rounds the operands and runs the float32 product: the
// same values, at float32 speed.
func engineGemmBF16(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	engineSgemm(transA, transB, m, n, k, alpha, roundedBF16(a), lda, roundedBF16(b), ldb, beta, c, ldc)
}

func bf16Impl(transA, transB bool, m, n, k, lda, ldb, ldc int) string { return "" }
