//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// void goddp_gelu_f32(float *dst, const float *src, int64_t n);
// void goddp_gelu_grad_f32(float *dst, const float *gy, const float *x, int64_t n);
// void goddp_gelu_with_grad_f32(float *dst, float *grad, const float *src, int64_t n);
// void goddp_mul_add_rows_f32(float *y, const float *x, const float *s, float *d, int64_t rows, int64_t cols);
import "C"

import "unsafe"

// geluCMin is the length from which GELU goes through the C kernels: a cgo
// call costs about as much as 16 elements of the Go loop.
const geluCMin = 64

func geluC(dst, src []float32) bool {
	C.goddp_gelu_f32((*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(src))), C.int64_t(len(src)))
	return true
}

func geluGradC(dst, gy, x []float32) bool {
	C.goddp_gelu_grad_f32((*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(gy))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(len(x)))
	return true
}

func geluWithGradC(dst, grad, src []float32) bool {
	C.goddp_gelu_with_grad_f32((*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(grad))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(src))), C.int64_t(len(src)))
	return true
}

func mulAddRowsC(y, x, s, d []float32, rows, cols int) bool {
	C.goddp_mul_add_rows_f32((*C.float)(unsafe.Pointer(unsafe.SliceData(y))), (*C.float)(unsafe.Pointer(unsafe.SliceData(x))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(s))), (*C.float)(unsafe.Pointer(unsafe.SliceData(d))),
		C.int64_t(rows), C.int64_t(cols))
	return true
}
