//go:build cgo && !noblas

package tensor

// #cgo CFLAGS: -O2
// #include <stdint.h>
// double goddp_sum_f32(const float *x, int64_t n);
// double goddp_sum_f64(const double *x, int64_t n);
// double goddp_sumsq_f32(const float *x, int64_t n);
import "C"

// sumCMin is the length from which SumAll goes through the C kernels
// (sum_kernels.c); BenchmarkSumKernels puts the break-even near 100.
const sumCMin = 128

// sumC returns sumSlice(x) computed by the vector kernels.
func sumC[T float](x []T) float64 {
	switch v := any(x).(type) {
	case []float32:
		return float64(C.goddp_sum_f32(f32p(v), C.int64_t(len(v))))
	case []float64:
		return float64(C.goddp_sum_f64(f64p(v), C.int64_t(len(v))))
	}
	panic("tensor: sumC on a non-float slice")
}

// sumSquaresC is sumSquaresGo(x) computed by the vector kernel.
func sumSquaresC(x []float32) float64 {
	return float64(C.goddp_sumsq_f32(f32p(x), C.int64_t(len(x))))
}
