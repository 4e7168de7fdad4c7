//go:build cuda

package cuda

/*
#include "driver_dl.h"
*/
import "C"

import "github.com/goddp/goddp/cuda/devtensor"

// bf16Device is a device with cuBLAS's bf16 GEMM (dlDevice; the tests'
// fakes have none, and devtensor then widens the operands and runs Sgemm).
type bf16Device interface {
	hasGemmBF16() bool
	// gemmBF16 is column-major cublasGemmEx: a and b bfloat16, c float32,
	// CUBLAS_COMPUTE_32F.
	gemmBF16(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error
}

// minCUBLASBF16 is cuBLAS 11.0: CUDA_R_16BF and cublasComputeType_t (whose
// CUBLAS_COMPUTE_32F gcu_gemm_bf16 passes) arrived with it.
const minCUBLASBF16 = 110000

func (d *dlDevice) hasGemmBF16() bool {
	return d.inf.CUBLASVersion >= minCUBLASBF16 && C.gcu_has_gemm_bf16(d.l) != 0
}

func (d *dlDevice) gemmBF16(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error {
	return d.blasStatus("cublasGemmEx (bf16)", C.gcu_gemm_bf16(d.l, d.ctx, d.blasH(), op(ta), op(tb), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.gcu_devptr(a), C.int(lda), C.gcu_devptr(b), C.int(ldb), C.float(beta), C.gcu_devptr(c), C.int(ldc)))
}

// GemmBF16 implements devtensor.BF16Launcher: the row-major product on
// bfloat16 operands (2 bytes an element at byte offsets aOff, bOff) into
// float32 C, mapped onto column-major cuBLAS as Sgemm is (C = op(A)·op(B)
// is Cᵀ = op(B)ᵀ·op(A)ᵀ). It returns false, queuing nothing, when cuBLAS
// has no bf16 GEMM (before 11.0).
func (l *launcher) GemmBF16(transA, transB bool, m, n, k int, alpha float32, a devtensor.Mem, aOff, lda int,
	b devtensor.Mem, bOff, ldb int, beta float32, c devtensor.Mem, cOff, ldc int) bool {
	bd, ok := l.c.dev.(bf16Device)
	if !ok || !bd.hasGemmBF16() {
		return false
	}
	if err := fits32("GemmBF16", m, n, k, lda, ldb, ldc); err != nil {
		l.sticky(err)
		return true
	}
	if ck := l.clock.Load(); ck != nil {
		defer l.timed(ck, gemmName("gemm_bf16", transA, transB, m, n, k, 1)+aligns(a.Ptr()+uint64(aOff), b.Ptr()+uint64(bOff), c.Ptr()+uint64(cOff)))()
	}
	l.sticky(l.c.do(func() error {
		return bd.gemmBF16(transB, transA, n, m, k, alpha, b.Ptr()+uint64(bOff), max(ldb, 1),
			a.Ptr()+uint64(aOff), max(lda, 1), beta, c.Ptr()+uint64(cOff), max(ldc, 1))
	}))
	return true
}

var _ devtensor.BF16Launcher = (*launcher)(nil)
