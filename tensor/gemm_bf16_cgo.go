//go:build cgo && !noblas

package tensor

/*
#include "engine.h"
*/
import "C"

import "unsafe"

func bf16Native() bool { return engineHasDNNL && C.goddp_bf16_native() != 0 }

// bf16Impl names oneDNN's implementation for a bf16 slice shape ("" for
// none): benchmarks print it.
func bf16Impl(transA, transB bool, m, n, k, lda, ldb, ldc int) string {
	if !engineHasDNNL {
		return ""
	}
	return C.GoString(C.goddp_bf16_impl(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.int64_t(lda), C.int64_t(ldb), C.int64_t(ldc)))
}

func engineToBF16(dst []uint16, src []float32) {
	C.goddp_to_bf16((*C.float)(unsafe.Pointer(unsafe.SliceData(src))),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), C.int64_t(len(src)))
}

func engineToBF16AddRows(dst []uint16, src, d []float32, rows, cols int) {
	C.goddp_to_bf16_add_rows((*C.float)(unsafe.Pointer(unsafe.SliceData(src))),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), (*C.float)(unsafe.Pointer(unsafe.SliceData(d))),
		C.int64_t(rows), C.int64_t(cols))
}

func engineGELUWithGradToBF16(y []uint16, grad, x []float32) {
	C.goddp_gelu_with_grad_to_bf16((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(y))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(grad))), (*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(len(x)))
}

func engineToBF16MulAddRows(dst []uint16, src, s, d []float32, rows, cols int) {
	C.goddp_to_bf16_mul_add_rows((*C.float)(unsafe.Pointer(unsafe.SliceData(src))), (*C.float)(unsafe.Pointer(unsafe.SliceData(s))),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), (*C.float)(unsafe.Pointer(unsafe.SliceData(d))),
		C.int64_t(rows), C.int64_t(cols))
}

// ptr returns the operand's first element and whether it holds bfloat16.
func (o BF16Operand) ptr() (unsafe.Pointer, C.int) {
	if o.H != nil {
		return unsafe.Pointer(unsafe.SliceData(o.H)), 1
	}
	return unsafe.Pointer(unsafe.SliceData(o.F)), 0
}

func engineGemmBF16Mixed(transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, beta float32, c []float32, ldc int) {
	ap, a16 := a.ptr()
	bp, b16 := b.ptr()
	rc := C.goddp_gemm_bf16_mixed(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.float(alpha), ap, a16, C.int64_t(lda), bp, b16, C.int64_t(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc))
	if rc != 0 {
		panic(engineError("GemmBF16", int(rc), m, n, k))
	}
}

// engineLinearBF16Mixed is engineLinear(true, ...) with x and w each
// rounded already or not.
func engineLinearBF16Mixed(y []float32, x, w BF16Operand, b []float32, n, in, out int) {
	xp, x16 := x.ptr()
	wp, w16 := w.ptr()
	rc := C.goddp_linear_bf16_mixed(C.int64_t(n), C.int64_t(out), C.int64_t(in), xp, x16, C.int64_t(in), wp, w16,
		C.int64_t(in), (*C.float)(unsafe.Pointer(unsafe.SliceData(b))), (*C.float)(unsafe.Pointer(unsafe.SliceData(y))),
		C.int64_t(out))
	if rc != 0 {
		panic(engineError("LinearBF16", int(rc), n, out, in))
	}
}
