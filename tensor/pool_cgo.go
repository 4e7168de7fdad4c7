//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// void goddp_maxpool2x2_f32(float *y, int64_t *idx, const float *x, int64_t planes, int64_t h, int64_t w);
// void goddp_maxpool2x2_bwd_f32(float *gx, const float *gy, const int64_t *idx, int64_t planes, int64_t h, int64_t w);
import "C"

import "unsafe"

// MaxPool2x2F32 is the 2x2, stride-2, unpadded max pool of planes planes
// of x [planes, h, w] (h and w even or odd: the last row or column of an
// odd size is dropped, as torch's floor mode) into y [planes, h/2, w/2]:
// each output is its window's first maximum in row-major order, the last
// NaN winning, and idx gets that element's offset in its [h, w] plane
// (int64, torch's index type).
func MaxPool2x2F32(y []float32, idx []int64, x []float32, planes, h, w int) {
	n := planes * (h / 2) * (w / 2)
	if n == 0 {
		return
	}
	_, _, _ = y[n-1], idx[n-1], x[planes*h*w-1]
	C.goddp_maxpool2x2_f32((*C.float)(unsafe.Pointer(&y[0])), (*C.int64_t)(unsafe.Pointer(&idx[0])),
		(*C.float)(unsafe.Pointer(&x[0])), C.int64_t(planes), C.int64_t(h), C.int64_t(w))
}

// MaxPool2x2BackwardF32 is MaxPool2x2F32's backward: gx [planes, h, w]
// gets, in every window, gy's value at the offset idx names and 0 at the
// window's other three elements; the last row or column of an odd size,
// in no window, gets 0. Every element of gx is written.
func MaxPool2x2BackwardF32(gx, gy []float32, idx []int64, planes, h, w int) {
	if planes*h*w == 0 {
		return
	}
	_ = gx[planes*h*w-1]
	if n := planes * (h / 2) * (w / 2); n > 0 {
		_, _ = gy[n-1], idx[n-1]
	}
	C.goddp_maxpool2x2_bwd_f32((*C.float)(unsafe.Pointer(&gx[0])), (*C.float)(unsafe.Pointer(unsafe.SliceData(gy))),
		(*C.int64_t)(unsafe.Pointer(unsafe.SliceData(idx))), C.int64_t(planes), C.int64_t(h), C.int64_t(w))
}
