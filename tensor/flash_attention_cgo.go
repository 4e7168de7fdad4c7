//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// void goddp_flash_fwd_tile_f32(float *s, int64_t m, int64_t n, int64_t lds, int64_t q0, int64_t k0, int causal, int bf16, float *mx, float *l, float *o, int64_t d, int64_t ldo, int first);
// void goddp_flash_fwd_finish_f32(float *o, int64_t m, int64_t d, int64_t ldo, const float *mx, const float *l, float *lse);
// void goddp_flash_bwd_tile_f32(float *s, float *dp, int64_t m, int64_t n, int64_t ld, int64_t q0, int64_t k0, int causal, int bf16, const float *lse, const float *dd);
// void goddp_flash_rowdot_f32(float *dd, const float *dy, int64_t lddy, const float *y, int64_t ldy, int64_t m, int64_t d);
// void goddp_flash_round_rows_f32(float *y, const float *x, int64_t rows, int64_t cols, int64_t ldx);
import "C"

import "unsafe"

// The float32 hooks of cpu_flash_attention.go's row work: each runs its C
// kernel (flash_attention_kernels.c) and reports true, or reports false
// for float64, which the Go loops serve. The callers have checked the
// bounds and that the work is not empty.

func cf(x []float32) *C.float { return (*C.float)(unsafe.Pointer(&x[0])) }

func flashFwdTileC[T float](s []T, m, n, lds, q0, k0 int, causal, bf16 bool, mx, l, o []T, d, ldo int, first bool) bool {
	sf, ok := any(s).([]float32)
	if ok {
		C.goddp_flash_fwd_tile_f32(cf(sf), C.int64_t(m), C.int64_t(n), C.int64_t(lds), C.int64_t(q0), C.int64_t(k0),
			cbool(causal), cbool(bf16), cf(any(mx).([]float32)), cf(any(l).([]float32)), cf(any(o).([]float32)),
			C.int64_t(d), C.int64_t(ldo), cbool(first))
	}
	return ok
}

func flashFwdFinishC[T float](o []T, m, d, ldo int, mx, l, lse []T) bool {
	of, ok := any(o).([]float32)
	if ok {
		C.goddp_flash_fwd_finish_f32(cf(of), C.int64_t(m), C.int64_t(d), C.int64_t(ldo), cf(any(mx).([]float32)),
			cf(any(l).([]float32)), cf(any(lse).([]float32)))
	}
	return ok
}

func flashBwdTileC[T float](s, dp []T, m, n, ld, q0, k0 int, causal, bf16 bool, lse, dd []T) bool {
	sf, ok := any(s).([]float32)
	if ok {
		C.goddp_flash_bwd_tile_f32(cf(sf), cf(any(dp).([]float32)), C.int64_t(m), C.int64_t(n), C.int64_t(ld),
			C.int64_t(q0), C.int64_t(k0), cbool(causal), cbool(bf16), cf(any(lse).([]float32)), cf(any(dd).([]float32)))
	}
	return ok
}

func flashRowDotC[T float](dd, dy []T, lddy int, y []T, ldy, m, d int) bool {
	df, ok := any(dd).([]float32)
	if ok {
		C.goddp_flash_rowdot_f32(cf(df), cf(any(dy).([]float32)), C.int64_t(lddy), cf(any(y).([]float32)), C.int64_t(ldy),
			C.int64_t(m), C.int64_t(d))
	}
	return ok
}

// flashRoundRows rounds the rows×cols matrix x (stride ldx) to bfloat16
// into the contiguous y.
func flashRoundRows(y, x []float32, rows, cols, ldx int) {
	C.goddp_flash_round_rows_f32(cf(y), cf(x), C.int64_t(rows), C.int64_t(cols), C.int64_t(ldx))
}
