//go:build cgo && !noblas

// Small float32 products on AVX-512 registers: attention's per-head
// products (64×64×32 with Bᵀ, 64×32×64 plain and with Aᵀ at a GPT's
// sizes). oneDNN's sgemm pays a fixed cost per call (argument checks,
// kernel dispatch, packing) that such a product, 262 KFLOP, does not
// amortise: in a GPT's steps these ran at 57-113 GFLOPS, against 180-200
// for its large products on the same core.
//
// C (m×n) = alpha·op(A)·op(B) + beta·C, beta 0 or 1, for n a multiple of
// 16 up to 64 and k up to 128: a block of rows keeps its whole row of C in
// 16 vector accumulators (4 rows of 64 columns, 8 of 32 or 16 of 16) while
// k runs; op(B)'s row kk is loaded once per block and step, op(A)'s
// elements are broadcast. op(B) with B transposed is first copied as k×n
// (at most 32 KB). Each element of C is one float32 sum over k in order,
// then scaled by alpha: no other rounding.

// O3: GCC unrolls the constant-bound loops over rows and vectors only
// there; at O2 the accumulators lived on the stack and the kernel ran at a
// third of oneDNN's rate.
#pragma GCC optimize("O3")

#include "engine.h"

#include <immintrin.h>
#include <stdint.h>

enum { smallMaxN = 64, smallMaxK = 128, smallMaxM = 512 };

// block computes rows i0..i0+R-1 of C; R and NV (vectors per row) are
// constants at every call, so the accumulators stay in registers.
__attribute__((target("avx512f"), always_inline)) static inline void
small_block(const int R, const int NV, int ta, int64_t k, float alpha, const float *a, int64_t lda, const float *bp,
            int64_t ldbp, float beta, float *c, int64_t ldc, int64_t i0) {
	__m512 acc[16][4];
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++)
			acc[r][v] = _mm512_setzero_ps();
	for (int64_t kk = 0; kk < k; kk++) {
		__m512 bv[4];
		for (int v = 0; v < NV; v++)
			bv[v] = _mm512_loadu_ps(bp + kk * ldbp + 16 * v);
		for (int r = 0; r < R; r++) {
			float x = ta ? a[kk * lda + i0 + r] : a[(i0 + r) * lda + kk];
			__m512 ab = _mm512_set1_ps(x);
			for (int v = 0; v < NV; v++)
				acc[r][v] = _mm512_fmadd_ps(ab, bv[v], acc[r][v]);
		}
	}
	__m512 al = _mm512_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) {
			float *p = c + (i0 + r) * ldc + 16 * v;
			__m512 y = _mm512_mul_ps(acc[r][v], al);
			if (beta != 0)
				y = _mm512_add_ps(y, _mm512_loadu_ps(p));
			_mm512_storeu_ps(p, y);
		}
}

// transpose16 writes the 16×16 block at src (rows lds apart) transposed
// to dst (rows ldd apart): 32-bit, 64-bit and two 128-bit shuffle stages.
// A scalar copy of op(B) cost as much as the product it serves.
__attribute__((target("avx512f"))) static void transpose16(const float *src, int64_t lds, float *dst, int64_t ldd) {
	__m512 r[16], t[16];
	for (int i = 0; i < 16; i++)
		r[i] = _mm512_loadu_ps(src + i * lds);
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
		r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
		r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int h = 0; h < 16; h += 8)
		for (int i = 0; i < 4; i++) {
			t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
			t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
		}
	for (int i = 0; i < 8; i++) {
		r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
		r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
	}
	for (int i = 0; i < 16; i++)
		_mm512_storeu_ps(dst + i * ldd, r[i]);
}

#define ROWS(R, NV)                                                                                        \
	for (; i + (R) <= m; i += (R))                                                                         \
		small_block((R), (NV), ta, k, alpha, a, lda, bp, ldbp, beta, c, ldc, i);                           \
	for (; i < m; i++)                                                                                     \
		small_block(1, (NV), ta, k, alpha, a, lda, bp, ldbp, beta, c, ldc, i);

__attribute__((target("avx512f"))) static void small_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k,
                                                             float alpha, const float *a, int64_t lda,
                                                             const float *b, int64_t ldb, float beta, float *c,
                                                             int64_t ldc) {
	float bt[smallMaxK * smallMaxN] __attribute__((aligned(64)));
	const float *bp = b;
	int64_t ldbp = ldb;
	if (tb) {
		int64_t k16 = k / 16 * 16;
		for (int64_t j = 0; j < n; j += 16)
			for (int64_t kk = 0; kk < k16; kk += 16)
				transpose16(b + j * ldb + kk, ldb, bt + kk * n + j, n);
		for (int64_t kk = k16; kk < k; kk++)
			for (int64_t j = 0; j < n; j++)
				bt[kk * n + j] = b[j * ldb + kk];
		bp = bt, ldbp = n;
	}
	int64_t i = 0;
	switch (n / 16) {
	case 1:
		ROWS(16, 1)
		break;
	case 2:
		ROWS(8, 2)
		break;
	case 3:
		ROWS(5, 3)
		break;
	default:
		ROWS(4, 4)
		break;
	}
}

int goddp_small_shape(int64_t m, int64_t n, int64_t k, float beta) {
	return m >= 1 && m <= smallMaxM && n >= 16 && n <= smallMaxN && n % 16 == 0 && k >= 1 && k <= smallMaxK &&
	       (beta == 0 || beta == 1);
}

void goddp_sgemm_small(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	small_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
