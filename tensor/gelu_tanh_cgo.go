//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// void goddp_gelu_tanh_f32(float *dst, const float *src, int64_t n);
// void goddp_gelu_tanh_with_grad_f32(float *dst, float *grad, const float *src, int64_t n);
// void goddp_gelu_tanh_grad_f32(float *dst, const float *gy, const float *x, int64_t n);
import "C"

import "unsafe"

// geluTanhC writes y (and d, when not nil) by gelu_tanh_kernels.c.
func geluTanhC(y, d, x []float32) bool {
	yp := (*C.float)(unsafe.Pointer(unsafe.SliceData(y)))
	xp := (*C.float)(unsafe.Pointer(unsafe.SliceData(x)))
	if d == nil {
		C.goddp_gelu_tanh_f32(yp, xp, C.int64_t(len(x)))
	} else {
		C.goddp_gelu_tanh_with_grad_f32(yp, (*C.float)(unsafe.Pointer(unsafe.SliceData(d))), xp, C.int64_t(len(x)))
	}
	return true
}

func geluTanhGradC(dx, dy, x []float32) bool {
	C.goddp_gelu_tanh_grad_f32((*C.float)(unsafe.Pointer(unsafe.SliceData(dx))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(dy))),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(len(x)))
	return true
}
