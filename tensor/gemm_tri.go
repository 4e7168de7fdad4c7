package tensor

import (
	"fmt"
	"time"

	"github.com/goddp/goddp/internal/half"
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
	checkTri("GemmTri", mode, transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
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

// checkTri is checkGemm for GemmTri's products, with the mode's shape.
func checkTri(op string, mode TriMode, transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	checkGemm(op, transA, transB, m, n, k, la, lda, lb, ldb, lc, ldc)
	switch mode {
	case TriCols:
		if m != n {
			panic(fmt.Sprintf("tensor: %s: mode %v needs a square result, not %dx%d", op, mode, m, n))
		}
	case TriKEnd, TriKStart:
		if m != k {
			panic(fmt.Sprintf("tensor: %s: mode %v needs a square op(A), not %dx%d", op, mode, m, k))
		}
	default:
		panic(fmt.Sprintf("tensor: %s: unknown mode %v", op, mode))
	}
}

// GemmTriBF16 is GemmTri with op(A) and op(B) as bfloat16 values: the
// products a bfloat16 GEMM forms, each exact in float32, summed in float32.
// This is autocast's causal attention. A float32 operand (F) is rounded to
// bfloat16 (ties to even, as RoundBF16) and stays as it is; a bfloat16 one
// (H) is used as it is, lda and ldb counting its elements.
//
// On the AVX512-BF16 register kernel (GemmTriBF16Native: an AMD CPU with
// AVX-512 and AVX512-BF16, attention's head sizes) float32 operands are
// rounded as they are packed, and the products are added a pair at a time
// (vdpbf16ps), at about twice GemmTri's rate: the sums differ from a
// float32 GEMM over the rounded operands by float32 roundings, and
// subnormal float32 operands count as zero. An operand that serves several
// products is best rounded once (RoundToBF16): a row-major op(A) in
// bfloat16 is not packed at all. Elsewhere GemmTriBF16 widens rounded
// copies of the operands and runs GemmTri.
func GemmTriBF16(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, c []float32, ldc int) {
	checkTri("GemmTriBF16", mode, transA, transB, m, n, k, a.len(), lda, b.len(), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	if k > 0 && alpha != 0 {
		var t0 time.Time
		p := recorder()
		if p != nil {
			t0 = time.Now()
		}
		if engineSgemmTriBF16(mode, transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc) {
			if p != nil {
				// As sgemm-causal, the rate counts the full product's FLOPs.
				profileGemm(p, "bf16-causal", transA, transB, m, n, k, t0)
			}
			return
		}
	}
	ra, lda := roundedMatrix(a, transA, m, k, lda)
	rb, ldb := roundedMatrix(b, transB, k, n, ldb)
	GemmTri(mode, transA, transB, m, n, k, alpha, ra, lda, rb, ldb, c, ldc)
}

// GemmTriBF16Native reports whether GemmTriBF16 runs a shape on the
// AVX512-BF16 register kernel on this CPU.
func GemmTriBF16Native(mode TriMode, m, n, k int) bool { return engineUsesTriBF16(mode, m, n, k) }

// roundedMatrix returns the operand x (op(x) rows×cols, x itself cols×rows
// when trans; row stride ld) as float32 values rounded to bfloat16 in a
// compact copy, with that copy's row stride.
func roundedMatrix(x BF16Operand, trans bool, rows, cols, ld int) ([]float32, int) {
	if trans {
		rows, cols = cols, rows
	}
	y := make([]float32, rows*cols)
	for i := range rows {
		yi := y[i*cols : (i+1)*cols]
		if x.H != nil {
			for j, h := range x.H[i*ld : i*ld+cols] {
				yi[j] = half.BF16ToF32(h)
			}
		} else {
			roundBF16s(yi, x.F[i*ld:i*ld+cols])
		}
	}
	return y, max(cols, 1)
}
