//go:build cgo && !noblas

// The row work between the tile products of the fused attention
// (cpu_flash_attention.go): the online softmax of a forward tile and the
// probabilities and scores' gradient of a backward tile, float32. Go
// compiles these loops to scalar code, and there are T²/2 of them per head
// in each direction, as many as the products' multiply-adds over D = 64.
// e**x is ExpF32's (fastexp.h, clamped as rownorm_kernels.c's exp_f32);
// target_clones builds AVX-512, AVX2+FMA and baseline versions and picks
// one at load time by the CPU.

#pragma GCC optimize("O3", "no-trapping-math")

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fastexp.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#define FLANES 16

void goddp_round_bf16_f32(float *y, const float *x, int64_t n); // rownorm_kernels.c

static inline float flash_exp(float v) {
	double y = v;
	y = y < -104 ? -104 : y;
	y = y > 89 ? 89 : y;
	return (float)goddp_exp(y);
}

static inline float flash_max(const float *restrict x, int64_t n) {
	float acc[FLANES];
	for (int j = 0; j < FLANES; j++) acc[j] = -INFINITY;
	int64_t i = 0;
	for (; i + FLANES <= n; i += FLANES)
		for (int j = 0; j < FLANES; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
	for (; i < n; i++) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
	float m = acc[0];
	for (int j = 1; j < FLANES; j++) m = acc[j] > m ? acc[j] : m;
	return m;
}

// visible is how many of the n keys k0.. row r (query q0+r) sees.
static inline int64_t visible(int64_t n, int64_t q0, int64_t k0, int64_t r, int causal) {
	if (!causal) return n;
	int64_t v = q0 + r - k0 + 1;
	return v < 0 ? 0 : (v < n ? v : n);
}

// goddp_flash_fwd_tile_f32 turns the m×n scaled scores s (row stride lds)
// of queries q0.. against keys k0.. into e**(s - running max) in place,
// zero where the mask hides a key, updates each row's running maximum mx
// and sum l, and rescales the row's output so far (o, m rows of d, stride
// ldo) by e**(old max - new max) unless first (the first key tile, which
// writes o with beta 0). With bf16 the probabilities are rounded to
// bfloat16 after the sum, as the operand of the product with v.
CLONES void goddp_flash_fwd_tile_f32(float *restrict s, int64_t m, int64_t n, int64_t lds, int64_t q0, int64_t k0,
                                     int causal, int bf16, float *restrict mx, float *restrict l, float *restrict o,
                                     int64_t d, int64_t ldo, int first) {
	for (int64_t r = 0; r < m; r++) {
		float *row = s + r * lds;
		int64_t v = visible(n, q0, k0, r, causal);
		memset(row + v, 0, (size_t)(n - v) * sizeof(float));
		if (v == 0) continue;
		float old = mx[r], nm = flash_max(row, v);
		nm = old > nm ? old : nm;
		float sum = 0;
		for (int64_t j = 0; j < v; j++) {
			float e = flash_exp(row[j] - nm);
			row[j] = e;
			sum += e;
		}
		float c = old == -INFINITY ? 0 : flash_exp(old - nm);
		l[r] = l[r] * c + sum;
		mx[r] = nm;
		if (!first && c != 1) {
			float *orow = o + r * ldo;
			for (int64_t j = 0; j < d; j++) orow[j] *= c;
		}
		if (bf16) goddp_round_bf16_f32(row, row, v);
	}
}

// goddp_flash_fwd_finish divides the m output rows (o, stride ldo) by their
// sums l and writes each row's log-sum-exp mx + log l to lse.
CLONES void goddp_flash_fwd_finish_f32(float *restrict o, int64_t m, int64_t d, int64_t ldo, const float *restrict mx,
                                       const float *restrict l, float *restrict lse) {
	for (int64_t r = 0; r < m; r++) {
		float inv = 1 / l[r], *orow = o + r * ldo;
		for (int64_t j = 0; j < d; j++) orow[j] *= inv;
		lse[r] = mx[r] + logf(l[r]);
	}
}

// goddp_flash_bwd_tile_f32 turns, for queries q0.. and keys k0.., the m×n
// scaled scores s into the probabilities p = e**(s - lse) and the
// gradient of the probabilities dp (both of row stride ld) into the
// scores' gradient p ⊙ (dp - dd), both zero where the mask hides a key;
// lse and dd (Σ dy·y) are the m rows'. With bf16 both are rounded to
// bfloat16 afterwards: from here on they are only products' operands.
CLONES void goddp_flash_bwd_tile_f32(float *restrict s, float *restrict dp, int64_t m, int64_t n, int64_t ld,
                                     int64_t q0, int64_t k0, int causal, int bf16, const float *restrict lse,
                                     const float *restrict dd) {
	for (int64_t r = 0; r < m; r++) {
		float *sr = s + r * ld, *dr = dp + r * ld;
		int64_t v = visible(n, q0, k0, r, causal);
		float ls = lse[r], dr0 = dd[r];
		for (int64_t j = 0; j < v; j++) {
			float p = flash_exp(sr[j] - ls);
			sr[j] = p;
			dr[j] = p * (dr[j] - dr0);
		}
		memset(sr + v, 0, (size_t)(n - v) * sizeof(float));
		memset(dr + v, 0, (size_t)(n - v) * sizeof(float));
		if (bf16) {
			goddp_round_bf16_f32(sr, sr, v);
			goddp_round_bf16_f32(dr, dr, v);
		}
	}
}

// goddp_flash_rowdot_f32 writes dd[r] = Σ_j dy[r, j]·y[r, j] for m rows of
// d (strides lddy, ldy): FlashAttention-2's D, the row sums of dp ⊙ p.
CLONES void goddp_flash_rowdot_f32(float *restrict dd, const float *restrict dy, int64_t lddy, const float *restrict y,
                                   int64_t ldy, int64_t m, int64_t d) {
	for (int64_t r = 0; r < m; r++) {
		const float *a = dy + r * lddy, *b = y + r * ldy;
		float acc[FLANES] = {0};
		int64_t i = 0;
		for (; i + FLANES <= d; i += FLANES)
			for (int j = 0; j < FLANES; j++) acc[j] += a[i + j] * b[i + j];
		for (; i < d; i++) acc[0] += a[i] * b[i];
		float sum = 0;
		for (int j = 0; j < FLANES; j++) sum += acc[j];
		dd[r] = sum;
	}
}

// goddp_flash_round_rows_f32 writes the rows×cols matrix x (row stride
// ldx) rounded to bfloat16 into the contiguous y: a head's q, k, v or dy
// for the bf16 products, rounded once per call.
CLONES void goddp_flash_round_rows_f32(float *restrict y, const float *restrict x, int64_t rows, int64_t cols,
                                       int64_t ldx) {
	for (int64_t r = 0; r < rows; r++) goddp_round_bf16_f32(y + r * cols, x + r * ldx, cols);
}
