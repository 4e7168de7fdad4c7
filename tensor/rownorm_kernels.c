//go:build cgo && !noblas

// Row-wise float32 kernels of a transformer step: LayerNorm forward and
// backward over rows of d, and the attention's softmax over rows of scores
// with its backward (rownorm.go's LayerNormF32, LayerNormBwdF32,
// SoftmaxRowsF32 and SoftmaxBwdRowsF32; rownorm_go.go has the same
// algorithms in Go). Go compiles these loops to scalar SSE, where a GPT
// of width 128 spent as long in them as in half its GEMMs.
//
// The statistics accumulate in double, as the Go loops do, but in eight
// independent lanes summed at the end, so that GCC vectorises them: the
// sums differ from a sequential loop's in the last bits of double, far
// below float32's ulp. e**x is fastmath.go's ExpF32 (the same reduction,
// polynomial and clamp). target_clones builds AVX-512, AVX2+FMA and
// baseline versions and picks one at load time by the CPU.

#pragma GCC optimize("O3", "no-trapping-math")

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fastexp.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#define LANES 8

// ExpF32's e**y: clamped to [-104, 89] (e**89 and e**-104 already round to
// +Inf and 0 in float32).
static inline float exp_f32(float v) {
	double y = v;
	y = y < -104 ? -104 : y;
	y = y > 89 ? 89 : y;
	return (float)goddp_exp(y);
}

static inline double sum_lanes(const double *acc) {
	double s = 0;
	for (int j = 0; j < LANES; j++) s += acc[j];
	return s;
}

// sum of x[0:n] and of (x - mean)² in double, eight lanes.
static inline double sum_f32(const float *restrict x, int64_t n) {
	double acc[LANES] = {0};
	int64_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
	for (; i < n; i++) acc[0] += (double)x[i];
	return sum_lanes(acc);
}

static inline double sqdev_f32(const float *restrict x, double mean, int64_t n) {
	double acc[LANES] = {0};
	int64_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int j = 0; j < LANES; j++) {
			double e = (double)x[i + j] - mean;
			acc[j] += e * e;
		}
	for (; i < n; i++) {
		double e = (double)x[i] - mean;
		acc[0] += e * e;
	}
	return sum_lanes(acc);
}

// xhat_row writes one row's xhat = (x - mean)·rstd: the forward's, and the
// backward's when it recomputes it.
static inline void xhat_row(float *restrict h, const float *restrict xr, double mean, double rstd, int64_t d) {
	for (int64_t i = 0; i < d; i++) h[i] = (float)(((double)xr[i] - mean) * rstd);
}

static int have_avx512f(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

// y = xhat·w + b over rows of d, xhat = (x - mean)·rstd, rstd = 1/√(var+eps)
// (biased variance; the statistics accumulate in double and are rounded to
// float, as torch keeps them, before xhat is computed from them, so that
// the backward recomputes the same xhat); w and b may be NULL. xhat may be NULL (a row's goes
// through a buffer that stays in cache), and mean_out too; the backward
// then recomputes xhat from x, mean and rstd, to the same bits.
CLONES int goddp_layernorm_fwd_f32(float *restrict y, float *restrict xhat, float *restrict mean_out,
                                   float *restrict rstd_out, const float *restrict x, const float *restrict w,
                                   const float *restrict b, int64_t rows, int64_t d, double eps) {
	float *buf = xhat ? NULL : malloc((size_t)d * sizeof(float));
	if (!xhat && !buf)
		return -1;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *hr = xhat ? xhat + r * d : buf, *yr = y + r * d;
		double m = sum_f32(xr, d) / (double)d;
		float mean = (float)m, rstd = (float)(1 / sqrt(sqdev_f32(xr, m, d) / (double)d + eps));
		rstd_out[r] = rstd;
		if (mean_out)
			mean_out[r] = mean;
		xhat_row(hr, xr, mean, rstd, d);
		if (w && b)
			for (int64_t i = 0; i < d; i++) yr[i] = hr[i] * w[i] + b[i];
		else if (w)
			for (int64_t i = 0; i < d; i++) yr[i] = hr[i] * w[i];
		else if (b)
			for (int64_t i = 0; i < d; i++) yr[i] = hr[i] + b[i];
		else
			memcpy(yr, hr, (size_t)d * sizeof(float));
	}
	free(buf);
	return 0;
}

// LayerNorm's backward over rows of d: dw += Σ gy·xhat and db += Σ gy
// (either may be NULL), and, when dx is not NULL,
// dx = rstd·(gh - mean(gh) - xhat·mean(gh·xhat)) with gh = gy·w (w may be NULL).
// With xhat NULL each row's is recomputed from x and mean (xhat_row).
// ln_bwd_avx512 is goddp_layernorm_bwd_f32 for the common case, written
// with AVX-512 intrinsics: xhat recomputed from x, w present, dw and db
// summed, d a multiple of 16. One pass over a row computes xhat, the
// parameters' sums and the two row sums, and a second writes dx; GCC's
// vectorisation of the generic loops below made five passes, each
// converting to double, at 1.14 ns an element on a Zen 4 core. The row
// sums keep the generic loops' lanes and order (element i into lane i mod
// 8, in order).
__attribute__((target("avx512f"))) static void ln_bwd_avx512(float *restrict dx, float *restrict dw,
                                                              float *restrict db, const float *restrict gy,
                                                              const float *restrict x, const float *restrict mean,
                                                              const float *restrict w, const float *restrict rstd,
                                                              float *restrict buf, int64_t rows, int64_t d) {
	for (int64_t r = 0; r < rows; r++) {
		const float *g = gy + r * d, *xr = x + r * d;
		__m512d m = _mm512_set1_pd(mean[r]), rs = _mm512_set1_pd(rstd[r]);
		__m512d a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd();
		for (int64_t i = 0; i < d; i += 16) {
			__m512 gv = _mm512_loadu_ps(g + i);
			__m256 xlo = _mm256_loadu_ps(xr + i), xhi = _mm256_loadu_ps(xr + i + 8);
			__m256 hlo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(xlo), m), rs));
			__m256 hhi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(xhi), m), rs));
			_mm256_storeu_ps(buf + i, hlo);
			_mm256_storeu_ps(buf + i + 8, hhi);
			__m512 h = _mm512_loadu_ps(buf + i);
			_mm512_storeu_ps(dw + i, _mm512_add_ps(_mm512_loadu_ps(dw + i), _mm512_mul_ps(gv, h)));
			_mm512_storeu_ps(db + i, _mm512_add_ps(_mm512_loadu_ps(db + i), gv));
			__m512d ghlo = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(g + i)), _mm512_cvtps_pd(_mm256_loadu_ps(w + i)));
			__m512d ghhi =
			    _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(g + i + 8)), _mm512_cvtps_pd(_mm256_loadu_ps(w + i + 8)));
			a1 = _mm512_add_pd(a1, ghlo);
			a2 = _mm512_add_pd(a2, _mm512_mul_pd(ghlo, _mm512_cvtps_pd(hlo)));
			a1 = _mm512_add_pd(a1, ghhi);
			a2 = _mm512_add_pd(a2, _mm512_mul_pd(ghhi, _mm512_cvtps_pd(hhi)));
		}
		if (!dx)
			continue;
		double t1[LANES], t2[LANES];
		_mm512_storeu_pd(t1, a1);
		_mm512_storeu_pd(t2, a2);
		__m512d s1 = _mm512_set1_pd(sum_lanes(t1) / (double)d), s2 = _mm512_set1_pd(sum_lanes(t2) / (double)d);
		float *out = dx + r * d;
		for (int64_t i = 0; i < d; i += 8) {
			__m512d gh = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(g + i)), _mm512_cvtps_pd(_mm256_loadu_ps(w + i)));
			__m512d t = _mm512_sub_pd(_mm512_sub_pd(gh, s1), _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(buf + i)), s2));
			_mm256_storeu_ps(out + i, _mm512_cvtpd_ps(_mm512_mul_pd(rs, t)));
		}
	}
}

CLONES int goddp_layernorm_bwd_f32(float *restrict dx, float *restrict dw, float *restrict db, const float *restrict gy,
                                   const float *restrict xhat, const float *restrict x, const float *restrict mean,
                                   const float *restrict w, const float *restrict rstd, int64_t rows, int64_t d) {
	float *buf = malloc((size_t)d * sizeof(float));
	if (!buf)
		return -1;
	if (!xhat && w && dw && db && d % 16 == 0 && have_avx512f()) {
		ln_bwd_avx512(dx, dw, db, gy, x, mean, w, rstd, buf, rows, d);
		free(buf);
		return 0;
	}
	for (int64_t r = 0; r < rows; r++) {
		const float *g = gy + r * d, *h = xhat ? xhat + r * d : buf;
		if (!xhat)
			xhat_row(buf, x + r * d, mean[r], rstd[r], d);
		if (dw)
			for (int64_t i = 0; i < d; i++) dw[i] += g[i] * h[i];
		if (db)
			for (int64_t i = 0; i < d; i++) db[i] += g[i];
		if (!dx) continue;
		double a1[LANES] = {0}, a2[LANES] = {0};
		int64_t i = 0;
		for (; i + LANES <= d; i += LANES)
			for (int j = 0; j < LANES; j++) {
				double gh = (double)g[i + j] * (w ? (double)w[i + j] : 1.0);
				a1[j] += gh;
				a2[j] += gh * (double)h[i + j];
			}
		for (; i < d; i++) {
			double gh = (double)g[i] * (w ? (double)w[i] : 1.0);
			a1[0] += gh;
			a2[0] += gh * (double)h[i];
		}
		double s1 = sum_lanes(a1) / (double)d, s2 = sum_lanes(a2) / (double)d, rs = rstd[r];
		float *out = dx + r * d;
		for (i = 0; i < d; i++) {
			double gh = (double)g[i] * (w ? (double)w[i] : 1.0);
			out[i] = (float)(rs * (gh - s1 - (double)h[i] * s2));
		}
	}
	free(buf);
	return 0;
}

// max and sum of x[0:n] in float32, sixteen lanes (NaN: the max skips it,
// the sum carries it).
#define FLANES 16
static inline float max_f32(const float *restrict x, int64_t n) {
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

static inline float fsum_f32(const float *restrict x, int64_t n) {
	float acc[FLANES] = {0};
	int64_t i = 0;
	for (; i + FLANES <= n; i += FLANES)
		for (int j = 0; j < FLANES; j++) acc[j] += x[i + j];
	for (; i < n; i++) acc[0] += x[i];
	float s = 0;
	for (int j = 0; j < FLANES; j++) s += acc[j];
	return s;
}

static inline float fdot_f32(const float *restrict x, const float *restrict y, int64_t n) {
	float acc[FLANES] = {0};
	int64_t i = 0;
	for (; i + FLANES <= n; i += FLANES)
		for (int j = 0; j < FLANES; j++) acc[j] += x[i + j] * y[i + j];
	for (; i < n; i++) acc[0] += x[i] * y[i];
	float s = 0;
	for (int j = 0; j < FLANES; j++) s += acc[j];
	return s;
}

// Each of the l rows of x (l×s scores) becomes its softmax after adding
// mask (l×s, or NULL); with causal, entries j > i are zeroed without being
// read. A row whose every entry is -inf, or that holds a NaN, comes out
// NaN, as in torch.
CLONES void goddp_softmax_rows_f32(float *restrict x, const float *restrict mask, int64_t l, int64_t s, int causal) {
	for (int64_t i = 0; i < l; i++) {
		float *row = x + i * s;
		int64_t n = s;
		if (causal) {
			n = i + 1 < s ? i + 1 : s;
			memset(row + n, 0, (size_t)(s - n) * sizeof(float));
		}
		if (mask)
			for (int64_t j = 0; j < n; j++) row[j] += mask[i * s + j];
		float m = max_f32(row, n);
		for (int64_t j = 0; j < n; j++) row[j] = exp_f32(row[j] - m);
		float inv = 1 / fsum_f32(row, n);
		for (int64_t j = 0; j < n; j++) row[j] *= inv;
	}
}

// The softmax's backward in place over the l rows of dp (l×s, the gradient
// of the probabilities p): dp = p ⊙ (dp - Σ_j dp·p); with causal, entries
// j > i become 0.
CLONES void goddp_softmax_bwd_rows_f32(float *restrict dp, const float *restrict p, int64_t l, int64_t s, int causal) {
	for (int64_t i = 0; i < l; i++) {
		int64_t n = s;
		if (causal) n = i + 1 < s ? i + 1 : s;
		const float *pr = p + i * s;
		float *dr = dp + i * s;
		float dot = fdot_f32(pr, dr, n);
		for (int64_t j = 0; j < n; j++) dr[j] = pr[j] * (dr[j] - dot);
		memset(dr + n, 0, (size_t)(s - n) * sizeof(float));
	}
}

// d[c] += Σ_r x[r·cols + c], the rows added one after another, as the Go
// loop does (the same bits): a Linear's bias gradient. Vectorised across
// columns.
CLONES void goddp_add_rows_f32(float *restrict d, const float *restrict x, int64_t rows, int64_t cols) {
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		for (int64_t c = 0; c < cols; c++) d[c] += xr[c];
	}
}

// e**y in double for y <= 0 (or NaN), clamped at -708 where 2**k stays
// normal; e**-708 is far below anything a float32 probability can hold.
static inline double exp_nonpos(double y) { return goddp_exp(y < -708 ? -708 : y); }

// The softmax of one row of c logits into p, in double: returns the row's
// maximum in *max and Σ e**(x - max) (the log-sum-exp is max + log of it).
// A NaN logit makes the maximum NaN, and with it every output.
CLONES double goddp_softmax_row_f64acc_f32_lanes(float *restrict p, const float *restrict x, int64_t c, double *max) {
	double m = -INFINITY;
	int nan = 0;
	for (int64_t j = 0; j < c; j++) {
		double v = x[j];
		nan |= v != v;
		m = v > m ? v : m;
	}
	if (nan) m = NAN;
	// As the Go loop: p holds e rounded to float32, then p·(1/Σe) rounded
	// again; the sum takes the unrounded e.
	double acc[LANES] = {0};
	int64_t j = 0;
	for (; j + LANES <= c; j += LANES)
		for (int l = 0; l < LANES; l++) {
			double e = exp_nonpos((double)x[j + l] - m);
			p[j + l] = (float)e;
			acc[l] += e;
		}
	for (; j < c; j++) {
		double e = exp_nonpos((double)x[j] - m);
		p[j] = (float)e;
		acc[0] += e;
	}
	double s = sum_lanes(acc), inv = 1 / s;
	for (j = 0; j < c; j++) p[j] = (float)((double)p[j] * inv);
	*max = m;
	return s;
}

// softmax_row_avx512 is goddp_softmax_row_f64acc_f32_lanes written with
// intrinsics: GCC left that loop's e**x in scalar double (a cross-entropy
// over GPT-2's 50304-token head spent 3.5 ns an element in it, 0.4 s of
// a training step at T=1024, batch 2). The same algorithm (goddp_exp's
// reduction and polynomial, the clamp at -708, e rounded to float32 into
// p, the unrounded e summed in double, p scaled by 1/Σ in double) on 8
// doubles at a time, summed in 16 lanes; the maximum is taken in float32,
// which orders the values as double does.
__attribute__((target("avx512f"))) static double softmax_row_avx512(float *restrict p, const float *restrict x, int64_t c,
                                                                    double *max) {
	__m512 vmax = _mm512_set1_ps(-INFINITY);
	__mmask16 nanm = 0;
	int64_t j = 0;
	for (; j + 16 <= c; j += 16) {
		__m512 v = _mm512_loadu_ps(x + j);
		nanm |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		vmax = _mm512_max_ps(vmax, v);
	}
	float mf = _mm512_reduce_max_ps(vmax);
	int nan = nanm != 0;
	for (; j < c; j++) {
		float v = x[j];
		nan |= v != v;
		mf = v > mf ? v : mf;
	}
	double m = nan ? NAN : (double)mf;
	const __m512d vm = _mm512_set1_pd(m), lo = _mm512_set1_pd(-708), log2e = _mm512_set1_pd(1.44269504088896340736),
	              ln2 = _mm512_set1_pd(0.693147180559945309417), shifter = _mm512_set1_pd(0x1.8p52 + 1023),
	              c0 = _mm512_set1_pd(1.0000000000312237), c1 = _mm512_set1_pd(0.5000000046680004),
	              c2 = _mm512_set1_pd(0.16666666249338286), c3 = _mm512_set1_pd(0.041666354325215704),
	              c4 = _mm512_set1_pd(0.008333402933959448), c5 = _mm512_set1_pd(0.0013941015328067642),
	              c6 = _mm512_set1_pd(0.00019841247011729895);
	__m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
#define GODDP_EXP8(xv, out)                                                                                             \
	do {                                                                                                            \
		__m512d y = _mm512_max_pd(lo, _mm512_sub_pd(xv, vm)); /* a NaN y stays NaN: max returns its 2nd operand */ \
		__m512d kf = _mm512_add_pd(_mm512_mul_pd(y, log2e), shifter);                                           \
		__m512d sc = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(kf), 52));                       \
		__m512d r = _mm512_sub_pd(y, _mm512_mul_pd(_mm512_sub_pd(kf, shifter), ln2));                           \
		__m512d r2 = _mm512_mul_pd(r, r);                                                                       \
		__m512d a = _mm512_add_pd(c0, _mm512_mul_pd(c1, r)), b = _mm512_add_pd(c2, _mm512_mul_pd(c3, r));       \
		__m512d d = _mm512_add_pd(c4, _mm512_mul_pd(c5, r));                                                    \
		__m512d q = _mm512_add_pd(_mm512_add_pd(a, _mm512_mul_pd(r2, b)),                                       \
		                          _mm512_mul_pd(_mm512_mul_pd(r2, r2), _mm512_add_pd(d, _mm512_mul_pd(r2, c6))));  \
		out = _mm512_add_pd(sc, _mm512_mul_pd(sc, _mm512_mul_pd(r, q)));                                       \
	} while (0)
	for (j = 0; j + 16 <= c; j += 16) {
		__m512 v = _mm512_loadu_ps(x + j);
		__m512d e0, e1;
		GODDP_EXP8(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), e0);
		GODDP_EXP8(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), e1);
		_mm256_storeu_ps(p + j, _mm512_cvtpd_ps(e0));
		_mm256_storeu_ps(p + j + 8, _mm512_cvtpd_ps(e1));
		acc0 = _mm512_add_pd(acc0, e0);
		acc1 = _mm512_add_pd(acc1, e1);
	}
#undef GODDP_EXP8
	double s = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
	for (; j < c; j++) {
		double e = exp_nonpos((double)x[j] - m);
		p[j] = (float)e;
		s += e;
	}
	double inv = 1 / s;
	const __m512d vinv = _mm512_set1_pd(inv);
	for (j = 0; j + 8 <= c; j += 8)
		_mm256_storeu_ps(p + j, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + j)), vinv)));
	for (; j < c; j++) p[j] = (float)((double)p[j] * inv);
	*max = m;
	return s;
}

// goddp_softmax_row_f64acc_f32: AVX-512's intrinsics when the CPU has them,
// else the lanes loop's best clone.
double goddp_softmax_row_f64acc_f32(float *restrict p, const float *restrict x, int64_t c, double *max) {
	if (__builtin_cpu_supports("avx512f")) return softmax_row_avx512(p, x, c, max);
	return goddp_softmax_row_f64acc_f32_lanes(p, x, c, max);
}

// y = x rounded to bfloat16 values (round to nearest even; a NaN stays a
// quiet NaN), engine.c's f32_to_bf16 and back, written branch-free so that
// GCC vectorises it: the attention rounds every operand of its bf16
// products with it, millions of elements a step.
static inline void round_bf16_span(float *y, const float *x, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
		uint32_t q = (u | 0x400000u) & 0xffff0000u;
		u = (u & 0x7fffffffu) > 0x7f800000u ? q : r;
		memcpy(&y[i], &u, sizeof u);
	}
}

CLONES void goddp_round_bf16_f32(float *y, const float *x, int64_t n) { round_bf16_span(y, x, n); }

// goddp_round_bf16_causal_f32 rounds, of the l×s matrix x, each row i's
// first min(i+1, s) entries into y (causal attention's probabilities and
// their gradient, zero past them); the rest of y is not written.
CLONES void goddp_round_bf16_causal_f32(float *y, const float *x, int64_t l, int64_t s) {
	for (int64_t i = 0; i < l; i++)
		round_bf16_span(y + i * s, x + i * s, i + 1 < s ? i + 1 : s);
}
