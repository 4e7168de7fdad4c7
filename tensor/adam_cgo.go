//go:build cgo && !noblas

package tensor

// #include <stdint.h>
// void goddp_adam_f32(float *p, const float *g, float *m, float *v, int64_t n, int decay, float a,
//                     float b1, float omb1, float b2, float omb2, float invBc2, float eps, float step, int level);
import "C"

import (
	"unsafe"

	"github.com/goddp/goddp/tensor/internal/simd"
)

// adamFusedF32 runs adamUpdate's common path (AdamW's decay, when decay,
// then the moments and the update) in one pass (adam_kernels.c) and
// reports true; builds without cgo report false and take the Go path.
func adamFusedF32(p, g, m, v []float32, decay bool, a float32, c simd.AdamConsts) bool {
	return adamFusedF32Level(p, g, m, v, decay, a, c, 2)
}

// adamFusedF32Level is adamFusedF32 on at most the given vector level (2
// AVX-512, 1 AVX, 0 scalar; tests take each).
func adamFusedF32Level(p, g, m, v []float32, decay bool, a float32, c simd.AdamConsts, level int) bool {
	if len(p) == 0 {
		return true
	}
	f := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	d := 0
	if decay {
		d = 1
	}
	C.goddp_adam_f32(f(p), f(g), f(m), f(v), C.int64_t(len(p)), C.int(d), C.float(a),
		C.float(c.B1), C.float(c.Omb1), C.float(c.B2), C.float(c.Omb2), C.float(c.InvBc2), C.float(c.Eps), C.float(c.Step), C.int(level))
	return true
}
