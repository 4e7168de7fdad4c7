//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #cgo LDFLAGS: -lm
// #include <stdint.h>
// void goddp_sgd_momentum_f32(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
//                             float damp, float wd, float sign, int first);
import "C"

import "unsafe"

// sgdMomentumF32 runs SGD with momentum (not Nesterov) on float32 in one
// pass (sgd_kernels.c).
func sgdMomentumF32(w, g, buf []float32, h sgdHyper, sign float32) {
	first := 0
	if h.first {
		first = 1
	}
	f := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	C.goddp_sgd_momentum_f32(f(w), f(g), f(buf), C.int64_t(len(w)), C.float(h.lr), C.float(h.momentum),
		C.float(1-h.dampening), C.float(h.wd), C.float(sign), C.int(first))
}
