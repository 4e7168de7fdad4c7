//go:build cgo && !noblas

package tensor

// #include <stdint.h>
// void goddp_mt_uniform64(uint32_t *state, int32_t *left, uint32_t *next, double *dst, int64_t n);
// void goddp_mt_dropout_f32(uint32_t *state, int32_t *left, uint32_t *next, float *y, float *mask, const float *x,
//                           int64_t n, double keep, float scale);
import "C"

import "unsafe"

// uniform64 writes len(dst) Float64 draws (mt19937_kernels.c).
func (m *mt19937) uniform64(dst []float64) {
	if len(dst) == 0 {
		return
	}
	C.goddp_mt_uniform64((*C.uint32_t)(unsafe.Pointer(&m.state[0])), (*C.int32_t)(unsafe.Pointer(&m.left)),
		(*C.uint32_t)(unsafe.Pointer(&m.next)), (*C.double)(unsafe.Pointer(unsafe.SliceData(dst))), C.int64_t(len(dst)))
}

// dropoutF32 is RNG.DropoutF32 for keep > 0 (mt19937_kernels.c).
func (m *mt19937) dropoutF32(y, mask, x []float32, keep float64, scale float32) {
	if len(y) == 0 {
		return
	}
	f := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	C.goddp_mt_dropout_f32((*C.uint32_t)(unsafe.Pointer(&m.state[0])), (*C.int32_t)(unsafe.Pointer(&m.left)),
		(*C.uint32_t)(unsafe.Pointer(&m.next)), f(y), f(mask), f(x), C.int64_t(len(y)), C.double(keep), C.float(scale))
}
