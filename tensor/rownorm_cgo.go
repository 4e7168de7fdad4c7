//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #cgo LDFLAGS: -lm
// #include <stdint.h>
// void goddp_layernorm_fwd_f32(float *y, float *xhat, double *rstd, const float *x, const float *w, const float *b, int64_t rows, int64_t d, double eps);
// void goddp_layernorm_bwd_f32(float *dx, float *dw, float *db, const float *gy, const float *xhat, const float *w, const double *rstd, int64_t rows, int64_t d);
// void goddp_softmax_rows_f32(float *x, const float *mask, int64_t l, int64_t s, int causal);
// void goddp_softmax_bwd_rows_f32(float *dp, const float *p, int64_t l, int64_t s, int causal);
// void goddp_add_rows_f32(float *d, const float *x, int64_t rows, int64_t cols);
// void goddp_round_bf16_f32(float *y, const float *x, int64_t n);
// double goddp_softmax_row_f64acc_f32(float *p, const float *x, int64_t c, double *max);
import "C"

import (
	"math"
	"unsafe"
)

// optF32 is the C pointer of an optional slice (NULL when empty).
func optF32(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

// LayerNormF32 normalizes rows of d: xhat = (x - mean)·rstd with rstd =
// 1/√(var + eps) (biased variance, statistics in float64), and y = xhat·w +
// b, w and b optional (nil). rstd gets one value per row.
func LayerNormF32(y, xhat []float32, rstd []float64, x, w, b []float32, rows, d int, eps float64) {
	checkRows("LayerNormF32", rows, d, len(y), len(xhat), len(x))
	if rows*d == 0 {
		return
	}
	_ = rstd[rows-1]
	checkAffine("LayerNormF32", d, w, b)
	C.goddp_layernorm_fwd_f32(optF32(y), optF32(xhat), (*C.double)(unsafe.Pointer(&rstd[0])), optF32(x), optF32(w), optF32(b),
		C.int64_t(rows), C.int64_t(d), C.double(eps))
}

// LayerNormBwdF32 is LayerNormF32's backward from the output gradient gy
// and the saved xhat and rstd: dw += Σ gy·xhat and db += Σ gy over the
// rows (each nil when not wanted), and dx (nil when not wanted) =
// rstd·(gh - mean(gh) - xhat·mean(gh·xhat)) with gh = gy·w (w may be nil).
func LayerNormBwdF32(dx, dw, db, gy, xhat, w []float32, rstd []float64, rows, d int) {
	checkRows("LayerNormBwdF32", rows, d, len(gy), len(xhat))
	if dx != nil {
		checkRows("LayerNormBwdF32", rows, d, len(dx))
	}
	if rows*d == 0 {
		return
	}
	_ = rstd[rows-1]
	checkAffine("LayerNormBwdF32", d, w, dw, db)
	C.goddp_layernorm_bwd_f32(optF32(dx), optF32(dw), optF32(db), optF32(gy), optF32(xhat), optF32(w),
		(*C.double)(unsafe.Pointer(&rstd[0])), C.int64_t(rows), C.int64_t(d))
}

// SoftmaxRowsF32 turns each of the l rows of x (l×s scores) into its
// softmax after adding mask (l×s, or nil); with causal, entries j > i are
// zeroed without being read. A row that is all -Inf, or holds a NaN, comes
// out NaN, as in torch.
func SoftmaxRowsF32(x, mask []float32, l, s int, causal bool) {
	checkRows("SoftmaxRowsF32", l, s, len(x))
	if mask != nil {
		checkRows("SoftmaxRowsF32", l, s, len(mask))
	}
	if l*s == 0 {
		return
	}
	c := 0
	if causal {
		c = 1
	}
	C.goddp_softmax_rows_f32(optF32(x), optF32(mask), C.int64_t(l), C.int64_t(s), C.int(c))
}

// SoftmaxBwdRowsF32 is the softmax's backward in place over the l rows of
// dp (l×s, the gradient of the probabilities p): dp = p ⊙ (dp - Σ_j dp·p);
// with causal, entries j > i become 0.
func SoftmaxBwdRowsF32(dp, p []float32, l, s int, causal bool) {
	checkRows("SoftmaxBwdRowsF32", l, s, len(dp), len(p))
	if l*s == 0 {
		return
	}
	c := 0
	if causal {
		c = 1
	}
	C.goddp_softmax_bwd_rows_f32(optF32(dp), optF32(p), C.int64_t(l), C.int64_t(s), C.int(c))
}

// AddRowsF32 adds the rows of x (rows×cols) to d (cols), one row after
// another: d[c] += Σ_r x[r·cols+c], the same bits as a plain loop.
func AddRowsF32(d, x []float32, rows, cols int) {
	checkRows("AddRowsF32", rows, cols, len(x))
	checkRows("AddRowsF32", 1, cols, len(d))
	if rows*cols == 0 {
		return
	}
	C.goddp_add_rows_f32(optF32(d), optF32(x), C.int64_t(rows), C.int64_t(cols))
}

// softmaxRowF32 writes the softmax of the logits x into p (len(x)) with
// float64 accumulation, and returns the row's maximum and Σ e**(x-max),
// whose log plus the maximum is the log-sum-exp. A NaN logit gives NaN.
func softmaxRowF32(p, x []float32) (m, sum float64) {
	if len(x) == 0 {
		return math.Inf(-1), 0
	}
	_ = p[len(x)-1]
	var cm C.double
	s := C.goddp_softmax_row_f64acc_f32(optF32(p), optF32(x), C.int64_t(len(x)), &cm)
	return float64(cm), float64(s)
}

// roundBF16s is RoundBF16Slice's kernel (dst may be src).
func roundBF16s(dst, src []float32) {
	if len(src) > 0 {
		C.goddp_round_bf16_f32((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), C.int64_t(len(src)))
	}
}
