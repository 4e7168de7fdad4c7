//go:build !cgo || noblas

package tensor

// The pure-Go engine, selected with CGO_ENABLED=0 or the noblas build tag:
// gonum's native BLAS, which blocks the product and spreads the blocks over
// goroutines. It is several times slower than OpenBLAS but needs no C library.

import (
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

const engineName = "go"

// engineCgo is false: the Go engine runs Go code, which the scheduler can
// preempt, so schedHint has nothing to do (see schedhint.go).
const engineCgo = false

func transOf(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

func engineSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	gonum.Implementation{}.Sgemm(transOf(transA), transOf(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// engineUsesSmall is false: the register kernel is C.
func engineUsesSmall(m, n, k int, beta float32) bool { return false }

// engineLinearFused is false: gonum has no product with a bias epilogue.
func engineLinearFused(m, n, k int) bool { return false }

// engineLinear is never reached: engineLinearFused is false.
func engineLinear(y, x, w, b []float32, n, in, out int) {
	panic("tensor: engineLinear without a fused engine")
}

func engineDgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	gonum.Implementation{}.Dgemm(transOf(transA), transOf(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// engineBLASCore is empty: gonum's kernels are Go code, the same on every CPU.
func engineBLASCore() string { return "" }

// engineSetThreads is a no-op: the Go engine sizes its worker pool from GOMAXPROCS.
func engineSetThreads(int) {}

// engineThreads is the Go engine's worker count: gonum spreads a product
// over up to GOMAXPROCS goroutines.
func engineThreads() int { return runtime.GOMAXPROCS(0) }

// engineSgemmTri runs the full product: gonum has no triangular kernel.
func engineSgemmTri(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, c []float32, ldc int) {
	engineSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
}

func engineUsesTri(mode TriMode, m, n, k int) bool { return false }

// engineSgemmTriBF16 reports false: the bf16 register kernel is C.
func engineSgemmTriBF16(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, c []float32, ldc int) bool {
	return false
}

func engineUsesTriBF16(mode TriMode, m, n, k int) bool { return false }
