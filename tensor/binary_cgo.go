//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// int goddp_bin_vv_f32(int op, float *d, const float *x, const float *y, int64_t n);
// int goddp_bin_vs_f32(int op, float *d, const float *x, float s, int64_t n);
// int goddp_bin_sv_f32(int op, float *d, float s, const float *y, int64_t n);
// int goddp_bin_vv_f64(int op, double *d, const double *x, const double *y, int64_t n);
// int goddp_bin_vs_f64(int op, double *d, const double *x, double s, int64_t n);
// int goddp_bin_sv_f64(int op, double *d, double s, const double *y, int64_t n);
import "C"

import "unsafe"

// binCMin is the length from which add/sub/mul/div go through the C kernels
// (binary_kernels.c): below it the cgo call costs more than the vector
// loop saves (BenchmarkBinaryKernels: even at 128, 4.6x at 1024).
const binCMin = 128

// binVVC computes dst = x op y for op in add..div through the C kernels and
// reports whether it did (false: overlap other than dst == x or dst == y).
// len(x) and len(y) must be at least len(dst).
func binVVC[T float](op binOp, dst, x, y []T) bool {
	n := C.int64_t(len(dst))
	switch d := any(dst).(type) {
	case []float32:
		xs, ys := any(x).([]float32), any(y).([]float32)
		return C.goddp_bin_vv_f32(C.int(op), f32p(d), f32p(xs), f32p(ys), n) != 0
	case []float64:
		xs, ys := any(x).([]float64), any(y).([]float64)
		return C.goddp_bin_vv_f64(C.int(op), f64p(d), f64p(xs), f64p(ys), n) != 0
	}
	return false
}

// binVSC is binVVC for dst = x op s.
func binVSC[T float](op binOp, dst, x []T, s T) bool {
	n := C.int64_t(len(dst))
	switch d := any(dst).(type) {
	case []float32:
		return C.goddp_bin_vs_f32(C.int(op), f32p(d), f32p(any(x).([]float32)), C.float(s), n) != 0
	case []float64:
		return C.goddp_bin_vs_f64(C.int(op), f64p(d), f64p(any(x).([]float64)), C.double(s), n) != 0
	}
	return false
}

// binSVC is binVVC for dst = s op y.
func binSVC[T float](op binOp, dst []T, s T, y []T) bool {
	n := C.int64_t(len(dst))
	switch d := any(dst).(type) {
	case []float32:
		return C.goddp_bin_sv_f32(C.int(op), f32p(d), C.float(s), f32p(any(y).([]float32)), n) != 0
	case []float64:
		return C.goddp_bin_sv_f64(C.int(op), f64p(d), C.double(s), f64p(any(y).([]float64)), n) != 0
	}
	return false
}

func f32p(s []float32) *C.float  { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
func f64p(s []float64) *C.double { return (*C.double)(unsafe.Pointer(unsafe.SliceData(s))) }
