package tensor

import (
	"fmt"
	"time"
)

// smallGemmWork is the m*n*k at or below which Gemm runs a plain Go loop
// instead of calling the BLAS engine. BenchmarkGemmSmall puts the crossover
// very low: a cgo call into OpenBLAS costs about 60 ns, and OpenBLAS's small-
// matrix kernels beat the scalar Go loop from about 4x4x4 up (16x16x16: 0.19
// vs 3.3 us; Linear(20,1) at batch 32: 0.32-0.43 vs 1.0-2.3 us).
const smallGemmWork = 32

// Gemm computes C = alpha*op(A)*op(B) + beta*C for row-major float32
// matrices, where op(X) is X or Xᵀ as selected by transA/transB. op(A) is
// m×k, op(B) is k×n and C is m×n; lda, ldb and ldc are the row strides of the
// matrices as stored. It is the single entry point through which every
// float32 matrix product in goddp reaches the BLAS engine (see BLASName).
//
// Bad dimensions or short slices panic: they are programmer errors.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm("Gemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if gemmTrivial(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if p := recorder(); p != nil {
		defer profileGemm(p, "sgemm", transA, transB, m, n, k, time.Now())
	}
	if m*n*k <= smallGemmWork {
		smallGemm32(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	schedHint(2 * float64(m) * float64(n) * float64(k))
	engineSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Gemm64 is Gemm for float64 matrices.
func Gemm64(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	checkGemm("Gemm64", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if gemmTrivial(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if p := recorder(); p != nil {
		defer profileGemm(p, "dgemm", transA, transB, m, n, k, time.Now())
	}
	if m*n*k <= smallGemmWork {
		smallGemm64(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	schedHint(2 * float64(m) * float64(n) * float64(k))
	engineDgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkGemm panics with a message naming op when the arguments cannot
// describe valid row-major matrices over the given slices.
func checkGemm(op string, transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("tensor: %s: negative dimension m=%d n=%d k=%d", op, m, n, k))
	}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	check := func(name string, rows, cols, l, ld int) {
		if ld < max(1, cols) {
			panic(fmt.Sprintf("tensor: %s: ld%s=%d < %d columns (m=%d n=%d k=%d transA=%v transB=%v)",
				op, name, ld, cols, m, n, k, transA, transB))
		}
		if rows > 0 && cols > 0 && l < (rows-1)*ld+cols {
			panic(fmt.Sprintf("tensor: %s: %s has %d elements, needs %d for a %dx%d matrix with ld=%d",
				op, name, l, (rows-1)*ld+cols, rows, cols, ld))
		}
	}
	check("A", rowsA, colsA, la, lda)
	check("B", rowsB, colsB, lb, ldb)
	check("C", m, n, lc, ldc)
}

// gemmTrivial does a product with nothing to multiply, and reports whether
// there was one: an empty C, or k = 0 or alpha = 0, where C = beta·C.
func gemmTrivial[T float](m, n, k int, alpha, beta T, c []T, ldc int) bool {
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return true
	}
	return false
}
