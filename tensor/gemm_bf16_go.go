//go:build !cgo || noblas

package tensor

func bf16Native() bool { return false }

// engineGemmBF16 rounds the operands and runs the float32 product: the
// same values, at float32 speed.
func engineGemmBF16(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	engineSgemm(transA, transB, m, n, k, alpha, roundedBF16(a), lda, roundedBF16(b), ldb, beta, c, ldc)
}

// engineLinearBF16 fills y's rows with the bias and adds the rounded
// operands' product.
func engineLinearBF16(y, x, w, b []float32, n, in, out int) {
	copyRows(y[:n*out], b[:out])
	engineGemmBF16(false, true, n, out, in, 1, x, in, w, in, 1, y, out)
}

func bf16Impl(transA, transB bool, m, n, k, lda, ldb, ldc int) string { return "" }
