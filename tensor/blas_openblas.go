//go:build cgo && !noblas

package tensor

// The default engine: OpenBLAS (Debian's libopenblas-dev) through gonum's
// netlib cgo bindings. netlib's own cgo stanza names no library, so the link
// flag lives here, next to the one OpenBLAS extension we call directly.

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
*/
import "C"

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"
)

const engineName = "openblas"

// engineCgo reports that engine calls are cgo calls (see schedhint.go).
const engineCgo = true

func transOf(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

func engineSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	netlib.Implementation{}.Sgemm(transOf(transA), transOf(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func engineDgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	netlib.Implementation{}.Dgemm(transOf(transA), transOf(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func engineSetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// engineThreads is the number of threads one engine call uses.
func engineThreads() int { return int(C.openblas_get_num_threads()) }
