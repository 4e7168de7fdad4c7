package tensor

import (
	"fmt"
	"time"
)

// TriMode says which part of a causal attention product GemmTri may skip.
// The product is C = alpha·op(A)·op(B) (beta 0) of a square causal mask:
// query i attends to keys j <= i.
type TriMode int

const (
	// TriCols: C is m×m and row i is needed in columns j <= i only (the
	// scores q·kᵀ and their gradient dO·vᵀ, which the causal softmax and
	// its backward read only there). Other elements of C may be left
	// unwritten.
	TriCols TriMode = 1
	// TriKEnd: op(A) is m×m and zero past its diagonal (the probabilities
	// p, or their gradient, as the left operand: p·v, ds·k).
	TriKEnd TriMode = 2
	// TriKStart: op(A) is m×m and zero before its diagonal (pᵀ·dO, dsᵀ·q).
	TriKStart TriMode = 3
)

func (m TriMode) String() string {
	switch m {
	case TriCols:
		return "cols"
	case TriKEnd:
		return "kend"
	case TriKStart:
		return "kstart"
	}
	return fmt.Sprintf("TriMode(%d)", int(m))
}

// GemmTri is Gemm with beta 0 for causal attention's products, which may
// skip the work its mask makes zero or unused (mode): on the AVX-512
// register kernel (an AMD CPU with AVX-512, attention's head sizes) it
// does, and about halves the products' arithmetic; elsewhere it runs the
// full product. Every element it writes has Gemm's bits for finite
// operands (a skipped term is a product with an exact zero).
func GemmTri(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, c []float32, ldc int) {
	checkGemm("GemmTri", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	switch mode {
	case TriCols:
		if m != n {
			panic(fmt.Sprintf("tensor: GemmTri: mode %v needs a square result, not %dx%d", mode, m, n))
		}
	case TriKEnd, TriKStart:
		if m != k {
			panic(fmt.Sprintf("tensor: GemmTri: mode %v needs a square op(A), not %dx%d", mode, m, k))
		}
	default:
		panic(fmt.Sprintf("tensor: GemmTri: unknown mode %v", mode))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 || !engineUsesTri(mode, m, n, k) {
		Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
		return
	}
	if p := recorder(); p != nil {
		// Named apart from sgemm: its rate counts the full product's FLOPs,
		// of which it computes about half.
		defer profileGemm(p, "sgemm-causal", transA, transB, m, n, k, time.Now())
	}
	engineSgemmTri(mode, transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
}
