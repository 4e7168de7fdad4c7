//go:build cgo && !noblas

// 2x2, stride-2 max pooling for float32 (autograd's MaxPool2d in a
// convnet), written so that GCC vectorises it: the Go loop branches on
// every comparison, and data-dependent branches mispredict about half the
// time, so it ran at a fraction of memory bandwidth. Here every choice is
// a select. Each output takes the first maximum of its window in row-major
// order, and a NaN (the last one) wins, as in the general loop and torch's
// CPU kernel ("val > maxval || isnan(val)"); idx gets
// the winner's offset in its [h, w] plane as an int64, torch's index type
// (the vectors compare int32 offsets and widen them on the store). target_clones builds AVX-512,
// AVX2 and baseline versions, picked at load time by the CPU; all give the
// same results (only comparisons and copies).
//
// A convnet's planes are narrow (a 28-wide input pools to 14 outputs a
// row), shorter than one AVX-512 vector, so GCC's vectorised loop never
// runs and every output takes the scalar tail: about 2 ns an input, ten
// times a pass over memory. With AVX-512 the rows go through
// maxpool_row_avx512 instead, 16 outputs at a time under masks (the last,
// partial chunk of a row too), deinterleaving each row pair's even and odd
// columns with one permute each.

#pragma GCC optimize("O3")

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define CLONES __attribute__((target_clones("avx2", "default")))

// One output row: ow outputs from input rows r0 and r1 (offsets b0 and
// b0 + w in the plane), into yr and ir.
typedef void row_fn(float *restrict yr, int64_t *restrict ir, const float *restrict r0, const float *restrict r1,
                    int64_t ow, int32_t b0, int32_t w);

CLONES static void maxpool_row(float *restrict yr, int64_t *restrict ir, const float *restrict r0,
                               const float *restrict r1, int64_t ow, int32_t b0, int32_t w) {
	int32_t b1 = b0 + w;
	for (int64_t ox = 0; ox < ow; ox++) {
		int32_t i = (int32_t)(2 * ox);
		float best = r0[i];
		int32_t bi = b0 + i;
		float v = r0[i + 1];
		int take = (v > best) | (v != v);
		best = take ? v : best;
		bi = take ? b0 + i + 1 : bi;
		v = r1[i];
		take = (v > best) | (v != v);
		best = take ? v : best;
		bi = take ? b1 + i : bi;
		v = r1[i + 1];
		take = (v > best) | (v != v);
		best = take ? v : best;
		bi = take ? b1 + i + 1 : bi;
		yr[ox] = best;
		ir[ox] = bi;
	}
}

// take folds candidate v (offset vi) into the running maximum: it wins when
// greater, or when it is NaN, as the scalar loop's select.
__attribute__((target("avx512f"))) static inline void take16(__m512 *best, __m512i *bi, __m512 v, __m512i vi) {
	__mmask16 m = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	*best = _mm512_mask_mov_ps(*best, m, v);
	*bi = _mm512_mask_mov_epi32(*bi, m, vi);
}

__attribute__((target("avx512f"))) static void maxpool_row_avx512(float *restrict yr, int64_t *restrict ir,
                                                                  const float *restrict r0, const float *restrict r1,
                                                                  int64_t ow, int32_t b0, int32_t w) {
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32(w);
	for (int64_t ox = 0; ox < ow; ox += 16) {
		int64_t n = ow - ox < 16 ? ow - ox : 16; // outputs in this chunk
		__mmask16 lo = n >= 8 ? 0xFFFF : (__mmask16)((1u << (2 * n)) - 1);
		__mmask16 hi = n > 8 ? (__mmask16)((1u << (2 * n - 16)) - 1) : 0;
		__mmask16 out = (__mmask16)((1u << n) - 1);
		const float *a0 = r0 + 2 * ox, *a1 = r1 + 2 * ox;
		__m512 l0 = _mm512_maskz_loadu_ps(lo, a0), h0 = _mm512_maskz_loadu_ps(hi, a0 + 16);
		__m512 l1 = _mm512_maskz_loadu_ps(lo, a1), h1 = _mm512_maskz_loadu_ps(hi, a1 + 16);
		// Offsets in the plane: the window's top-left is b0 + 2·ox.
		__m512i i00 = _mm512_add_epi32(_mm512_set1_epi32(b0 + (int32_t)(2 * ox)), even);
		__m512 best = _mm512_permutex2var_ps(l0, even, h0);
		__m512i bi = i00;
		take16(&best, &bi, _mm512_permutex2var_ps(l0, odd, h0), _mm512_add_epi32(i00, one));
		__m512i i10 = _mm512_add_epi32(i00, wv);
		take16(&best, &bi, _mm512_permutex2var_ps(l1, even, h1), i10);
		take16(&best, &bi, _mm512_permutex2var_ps(l1, odd, h1), _mm512_add_epi32(i10, one));
		_mm512_mask_storeu_ps(yr + ox, out, best);
		// Widened to int64 in two halves of 8 lanes.
		_mm512_mask_storeu_epi64(ir + ox, (__mmask8)out, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bi)));
		_mm512_mask_storeu_epi64(ir + ox + 8, (__mmask8)(out >> 8),
		                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bi, 1)));
	}
}

// In a model the pooled activation comes from memory, not cache (a
// convnet's first one is 6.4 MB at batch 64, written by the convolution
// before it), and the hardware prefetchers did not keep these loops fed:
// 28-wide rows read as masked vectors ran at 8 GB/s from memory against
// 30 GB/s from cache and 40 GB/s for a copy (BenchmarkMaxPool2x2F32's cold
// case, one thread). So each row pair first prefetches the lines
// PF_AHEAD bytes on in the stream it reads (and, in the backward, writes):
// far enough ahead to cover memory's latency at the loop's rate (about
// 100 ns at 20 GB/s is 2 KB), near enough that the lines are still in L1
// or L2 when the loop reaches them. With it the cold case ran at 15-28
// GB/s: 1.21-1.23 → 0.34-0.63 ms for the forward and 0.86-0.92 →
// 0.38-0.44 ms for the backward (the benchmarks' memory cases).
// A prefetch never faults, so the lines past a buffer's end need no check.
#define PF_AHEAD 2048

// prefetch_span prefetches the bytes [p + ahead, p + ahead + bytes), for
// writing when write is set. The address is formed as an integer: it may
// lie past the buffer, which a pointer may not.
static inline void prefetch_span(const void *p, int64_t bytes, int64_t ahead, int write) {
	const char *c = (const char *)((uintptr_t)p + (uintptr_t)ahead);
	for (int64_t b = 0; b < bytes; b += 64) {
		if (write)
			__builtin_prefetch(c + b, 1, 3);
		else
			__builtin_prefetch(c + b, 0, 3);
	}
}

void goddp_maxpool2x2_f32(float *restrict y, int64_t *restrict idx, const float *restrict x, int64_t planes, int64_t h,
                          int64_t w) {
	__builtin_cpu_init();
	row_fn *row = __builtin_cpu_supports("avx512f") ? maxpool_row_avx512 : maxpool_row;
	int64_t oh = h / 2, ow = w / 2;
	for (int64_t p = 0; p < planes; p++) {
		const float *xp = x + p * h * w;
		for (int64_t oy = 0; oy < oh; oy++) {
			const float *r0 = xp + 2 * oy * w;
			int64_t o = p * oh * ow + oy * ow;
			prefetch_span(r0, 2 * w * (int64_t)sizeof(float), PF_AHEAD, 0);
			row(y + o, idx + o, r0, r0 + w, ow, (int32_t)(2 * oy * w), (int32_t)w);
		}
	}
}

// The backward of goddp_maxpool2x2_f32: gx [planes, h, w] gets, in every
// window, the output's gradient at the argmax idx names and 0 at the other
// three; a row or column of an odd size, in no window, gets 0. Every
// element of gx is written once, so gx needs no zeroing pass first. In Go
// this was a zeroing loop and a scatter, about 4% of a convnet step; here
// each row pair is written once, in order.

typedef void bwd_row_fn(float *restrict g0, float *restrict g1, const float *restrict gy, const int64_t *restrict ir,
                        int64_t ow, int32_t b0, int32_t w);

CLONES static void maxpool_bwd_row(float *restrict g0, float *restrict g1, const float *restrict gy,
                                   const int64_t *restrict ir, int64_t ow, int32_t b0, int32_t w) {
	for (int64_t ox = 0; ox < ow; ox++) {
		int32_t c = (int32_t)ir[ox] - (b0 + (int32_t)(2 * ox)); // 0, 1, w or w + 1
		float v = gy[ox];
		g0[2 * ox] = c == 0 ? v : 0;
		g0[2 * ox + 1] = c == 1 ? v : 0;
		g1[2 * ox] = c == w ? v : 0;
		g1[2 * ox + 1] = c == w + 1 ? v : 0;
	}
}

// 16 outputs at a time under masks, as maxpool_row_avx512: the four
// candidates' gradients are selected by comparing idx with each offset,
// then each row's even and odd columns are interleaved with one permute.
__attribute__((target("avx512f"))) static void maxpool_bwd_row_avx512(float *restrict g0, float *restrict g1,
                                                                      const float *restrict gy,
                                                                      const int64_t *restrict ir, int64_t ow,
                                                                      int32_t b0, int32_t w) {
	const __m512i lanes2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i lo_ix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi_ix = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
	const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32(w), w1 = _mm512_set1_epi32(w + 1);
	for (int64_t ox = 0; ox < ow; ox += 16) {
		int64_t n = ow - ox < 16 ? ow - ox : 16;
		__mmask16 lo = n >= 8 ? 0xFFFF : (__mmask16)((1u << (2 * n)) - 1);
		__mmask16 hi = n > 8 ? (__mmask16)((1u << (2 * n - 16)) - 1) : 0;
		__mmask16 in = (__mmask16)((1u << n) - 1);
		__m512 v = _mm512_maskz_loadu_ps(in, gy + ox);
		// The int64 offsets, narrowed to int32 (they index one plane).
		__m512i i32 = _mm512_inserti64x4(
		    _mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)in, ir + ox))),
		    _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)(in >> 8), ir + ox + 8)), 1);
		__m512i c = _mm512_sub_epi32(i32,
		                             _mm512_add_epi32(_mm512_set1_epi32(b0 + (int32_t)(2 * ox)), lanes2));
		__m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(c, _mm512_setzero_si512()), v);
		__m512 o0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(c, one), v);
		__m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(c, wv), v);
		__m512 o1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(c, w1), v);
		float *a0 = g0 + 2 * ox, *a1 = g1 + 2 * ox;
		_mm512_mask_storeu_ps(a0, lo, _mm512_permutex2var_ps(e0, lo_ix, o0));
		_mm512_mask_storeu_ps(a0 + 16, hi, _mm512_permutex2var_ps(e0, hi_ix, o0));
		_mm512_mask_storeu_ps(a1, lo, _mm512_permutex2var_ps(e1, lo_ix, o1));
		_mm512_mask_storeu_ps(a1 + 16, hi, _mm512_permutex2var_ps(e1, hi_ix, o1));
	}
}

void goddp_maxpool2x2_bwd_f32(float *restrict gx, const float *restrict gy, const int64_t *restrict idx,
                              int64_t planes, int64_t h, int64_t w) {
	__builtin_cpu_init();
	bwd_row_fn *row = __builtin_cpu_supports("avx512f") ? maxpool_bwd_row_avx512 : maxpool_bwd_row;
	int64_t oh = h / 2, ow = w / 2;
	for (int64_t p = 0; p < planes; p++) {
		float *gp = gx + p * h * w;
		for (int64_t oy = 0; oy < oh; oy++) {
			float *g0 = gp + 2 * oy * w, *g1 = g0 + w;
			int64_t o = p * oh * ow + oy * ow;
			prefetch_span(g0, 2 * w * (int64_t)sizeof(float), PF_AHEAD, 1);
			// gy advances a quarter as fast as gx, idx (8-byte) half as fast.
			prefetch_span(gy + o, ow * (int64_t)sizeof(float), PF_AHEAD / 4, 0);
			prefetch_span(idx + o, ow * (int64_t)sizeof(int64_t), PF_AHEAD / 2, 0);
			row(g0, g1, gy + o, idx + o, ow, (int32_t)(2 * oy * w), (int32_t)w);
			if (w % 2 == 1)
				g0[w - 1] = g1[w - 1] = 0;
		}
		if (h % 2 == 1)
			memset(gp + (h - 1) * w, 0, (size_t)w * sizeof(float));
	}
}
