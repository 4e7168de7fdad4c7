//go:build cgo && !noblas

// SumAll's float64 accumulation (reduce.go's sumSlice order): sixteen
// interleaved accumulators, element i into lane i%16, combined pairwise
// (lane j += lane j+8, then j+4, j+2, j+1), then the tail added in order.
// Every lane is a plain sequence of IEEE additions, so GCC vectorises the
// lanes (two AVX-512 or four AVX2 registers) without reordering anything:
// each clone and the Go loop give the same bits.

#pragma GCC optimize("O3")

#include <stdint.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

#define SUM(T, S)                                                    \
	CLONES double goddp_sum_##S(const T *x, int64_t n) {             \
		double acc[16] = {0};                                        \
		int64_t i = 0;                                               \
		for (; i + 16 <= n; i += 16)                                 \
			for (int j = 0; j < 16; j++) acc[j] += (double)x[i + j]; \
		for (int w = 8; w >= 1; w /= 2)                              \
			for (int j = 0; j < w; j++) acc[j] += acc[j + w];        \
		double s = acc[0];                                           \
		for (; i < n; i++) s += (double)x[i];                        \
		return s;                                                    \
	}

SUM(float, f32)
SUM(double, f64)

// The float64-accumulated sum of squares of a float32 slice (ClipGradNorm's
// global norm), in SumAll's lane order. A float32 squared is exact in
// double (48 significant bits), so every clone, with or without FMA, and
// the Go loop (sumSquaresGo) give the same bits.
CLONES double goddp_sumsq_f32(const float *x, int64_t n) {
	double acc[16] = {0};
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		for (int j = 0; j < 16; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
	for (int w = 8; w >= 1; w /= 2)
		for (int j = 0; j < w; j++) acc[j] += acc[j + w];
	double s = acc[0];
	for (; i < n; i++) s += (double)x[i] * (double)x[i];
	return s;
}
