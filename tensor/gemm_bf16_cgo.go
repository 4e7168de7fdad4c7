//go:build cgo && !noblas

package tensor

/*
#include "engine.h"
*/
import "C"

import "unsafe"

func bf16Native() bool { return engineHasDNNL && C.goddp_bf16_native() != 0 }

func engineGemmBF16(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	rc := C.goddp_gemm_bf16(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(a))), C.int64_t(lda),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(b))), C.int64_t(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc))
	if rc != 0 {
		panic(engineError("GemmBF16", int(rc), m, n, k))
	}
}

// bf16Impl names oneDNN's implementation for a bf16 slice shape ("" for
// none): benchmarks print it.
func bf16Impl(transA, transB bool, m, n, k, lda, ldb, ldc int) string {
	if !engineHasDNNL {
		return ""
	}
	return C.GoString(C.goddp_bf16_impl(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.int64_t(lda), C.int64_t(ldb), C.int64_t(ldc)))
}
