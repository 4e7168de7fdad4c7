//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #cgo LDFLAGS: -lm
// #include <stdint.h>
// int goddp_layernorm_fwd_f32(float *y, float *xhat, float *mean, float *rstd, const float *x, const float *w, const float *b, int64_t rows, int64_t d, double eps);
// int goddp_layernorm_bwd_f32(float *dx, float *dw, float *db, const float *gy, const float *xhat, const float *x, const float *mean, const float *w, const float *rstd, int64_t rows, int64_t d);
// void goddp_softmax_rows_f32(float *x, const float *mask, int64_t l, int64_t s, int causal);
// void goddp_softmax_bwd_rows_f32(float *dp, const float *p, int64_t l, int64_t s, int causal);
// void goddp_add_rows_f32(float *d, const float *x, int64_t rows, int64_t cols);
// void goddp_round_bf16_f32(float *y, const float *x, int64_t n);
// void goddp_round_bf16_causal_f32(float *y, const float *x, int64_t l, int64_t s);
// double goddp_softmax_row_f64acc_f32(float *p, const float *x, int64_t c, double *max);
import "C"

import (
	"fmt"
	"unsafe"
)

// The hooks of rownorm.go: each runs its float32 C kernel
// (rownorm_kernels.c) and reports true, or reports false for float64.
// rownorm.go has checked the lengths and that the work is not empty.

// optF32 is the C pointer of an optional float32 slice (NULL when empty);
// ok is false when s is not []float32.
func optF32[T float](s []T) (p *C.float, ok bool) {
	f, ok := any(s).([]float32)
	if ok && len(f) > 0 {
		p = (*C.float)(unsafe.Pointer(&f[0]))
	}
	return p, ok
}

func layerNormC[T float](y, xhat, mean, rstd, x, w, b []T, rows, d int, eps float64) bool {
	yp, ok := optF32(y)
	if !ok {
		return false
	}
	hp, _ := optF32(xhat)
	mp, _ := optF32(mean)
	rp, _ := optF32(rstd)
	xp, _ := optF32(x)
	wp, _ := optF32(w)
	bp, _ := optF32(b)
	if C.goddp_layernorm_fwd_f32(yp, hp, mp, rp, xp, wp, bp, C.int64_t(rows), C.int64_t(d), C.double(eps)) != 0 {
		panic(fmt.Sprintf("tensor: LayerNormRows: no memory for a row of %d", d))
	}
	return true
}

func layerNormBwdC[T float](dx, dw, db, gy, xhat, x, mean, w, rstd []T, rows, d int) bool {
	gp, ok := optF32(gy)
	if !ok {
		return false
	}
	dxp, _ := optF32(dx)
	dwp, _ := optF32(dw)
	dbp, _ := optF32(db)
	hp, _ := optF32(xhat)
	xp, _ := optF32(x)
	wp, _ := optF32(w)
	mp, _ := optF32(mean)
	rp, _ := optF32(rstd)
	if C.goddp_layernorm_bwd_f32(dxp, dwp, dbp, gp, hp, xp, mp, wp, rp, C.int64_t(rows), C.int64_t(d)) != 0 {
		panic(fmt.Sprintf("tensor: LayerNormRowsBackward: no memory for a row of %d", d))
	}
	return true
}

func softmaxRowsC[T float](x, mask []T, l, s int, causal bool) bool {
	xp, ok := optF32(x)
	if ok {
		mp, _ := optF32(mask)
		C.goddp_softmax_rows_f32(xp, mp, C.int64_t(l), C.int64_t(s), cbool(causal))
	}
	return ok
}

func softmaxBwdRowsC[T float](dp, p []T, l, s int, causal bool) bool {
	dpp, ok := optF32(dp)
	if ok {
		pp, _ := optF32(p)
		C.goddp_softmax_bwd_rows_f32(dpp, pp, C.int64_t(l), C.int64_t(s), cbool(causal))
	}
	return ok
}

func addRowsC[T float](d, x []T, rows, cols int) bool {
	dp, ok := optF32(d)
	if ok {
		xp, _ := optF32(x)
		C.goddp_add_rows_f32(dp, xp, C.int64_t(rows), C.int64_t(cols))
	}
	return ok
}

// softmaxRowC is softmaxRow's float32 kernel (float64 accumulation, e**x
// to about 2.3e-10, summed in lanes); x is not empty.
func softmaxRowC[T float](p, x []T) (m, sum float64, ok bool) {
	pp, ok := optF32(p)
	if !ok {
		return 0, 0, false
	}
	xp, _ := optF32(x)
	var cm C.double
	s := C.goddp_softmax_row_f64acc_f32(pp, xp, C.int64_t(len(x)), &cm)
	return float64(cm), float64(s), true
}

// roundBF16s is RoundBF16Slice's kernel (dst may be src).
func roundBF16s(dst, src []float32) {
	if len(src) > 0 {
		C.goddp_round_bf16_f32((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), C.int64_t(len(src)))
	}
}

// roundBF16Causal is RoundBF16Causal's kernel.
func roundBF16Causal(dst, src []float32, l, s int) {
	if l*s > 0 {
		C.goddp_round_bf16_causal_f32((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])),
			C.int64_t(l), C.int64_t(s))
	}
}
