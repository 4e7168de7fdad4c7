//go:build cgo && !noblas

// AdamW for float32 in one pass over memory (adamUpdate's common path).
// The step was two passes: the decoupled weight decay (p += -lr·wd·p, an
// axpy that reads and writes p) and then the moments and the update (reads
// p, g, m, v, writes p, m, v): nine streams of a parameter's size where one
// pass needs seven. GPT-2 124M's step moves 124M parameters, so the step is
// bound by memory traffic; AVX-512 also does the square root and the
// division 16 lanes at a time where the SSE2 kernel did 4.
//
// The arithmetic is adamUpdate's Go loop, operation by operation and in its
// order (the bits are the same, TestAdamFusedMatchesScalar): the decay as
// the axpy computed it, p + (-lr·wd)·p; m = b1·m + (1-b1)·g; v = b2·v +
// ((1-b2)·g)·g; p = p - (step·m) / (√v·(1/bc2) + eps). fp-contract is off
// so that the compiler fuses nothing into an FMA. The vector loops are
// written with intrinsics: GCC vectorises sqrtf only under -fno-math-errno,
// which neither a pragma nor cgo's allowed flags can give; the vector
// square root and division are correctly rounded, as Go's float64 square
// root rounded to float32 and its float32 division are.

#pragma GCC optimize("O3", "fp-contract=off")

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

typedef struct {
	float a, b1, omb1, b2, omb2, invBc2, eps, step;
} adam_consts_t;

// adam_tail is the scalar loop, from i to n.
static inline void adam_tail(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t i,
                             int64_t n, int decay, adam_consts_t c) {
	for (; i < n; i++) {
		float pi = p[i];
		if (decay) pi = pi + c.a * pi;
		float gi = g[i];
		float mi = c.b1 * m[i] + c.omb1 * gi;
		float vi = c.b2 * v[i] + c.omb2 * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = pi - c.step * mi / (sqrtf(vi) * c.invBc2 + c.eps);
	}
}

__attribute__((target("avx512f"))) static void adam_avx512(float *restrict p, const float *restrict g,
                                                            float *restrict m, float *restrict v, int64_t n, int decay,
                                                            adam_consts_t c) {
	const __m512 a = _mm512_set1_ps(c.a), b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.omb1),
	             b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.omb2), inv = _mm512_set1_ps(c.invBc2),
	             eps = _mm512_set1_ps(c.eps), step = _mm512_set1_ps(c.step);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 pi = _mm512_loadu_ps(p + i), gi = _mm512_loadu_ps(g + i);
		if (decay) pi = _mm512_add_ps(pi, _mm512_mul_ps(a, pi));
		__m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, gi));
		__m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
		_mm512_storeu_ps(m + i, mi);
		_mm512_storeu_ps(v + i, vi);
		__m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), inv), eps);
		_mm512_storeu_ps(p + i, _mm512_sub_ps(pi, _mm512_div_ps(_mm512_mul_ps(step, mi), den)));
	}
	adam_tail(p, g, m, v, i, n, decay, c);
}

__attribute__((target("avx"))) static void adam_avx(float *restrict p, const float *restrict g, float *restrict m,
                                                     float *restrict v, int64_t n, int decay, adam_consts_t c) {
	const __m256 a = _mm256_set1_ps(c.a), b1 = _mm256_set1_ps(c.b1), omb1 = _mm256_set1_ps(c.omb1),
	             b2 = _mm256_set1_ps(c.b2), omb2 = _mm256_set1_ps(c.omb2), inv = _mm256_set1_ps(c.invBc2),
	             eps = _mm256_set1_ps(c.eps), step = _mm256_set1_ps(c.step);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 pi = _mm256_loadu_ps(p + i), gi = _mm256_loadu_ps(g + i);
		if (decay) pi = _mm256_add_ps(pi, _mm256_mul_ps(a, pi));
		__m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, gi));
		__m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
		_mm256_storeu_ps(m + i, mi);
		_mm256_storeu_ps(v + i, vi);
		__m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), inv), eps);
		_mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_div_ps(_mm256_mul_ps(step, mi), den)));
	}
	adam_tail(p, g, m, v, i, n, decay, c);
}

// goddp_adam_f32: a is -lr·wd, applied when decay is not 0 (the Go side
// skips the decay when wd is 0, and so does this: 0·Inf would be NaN).
// The widest of AVX-512 (level 2), AVX (1) and the scalar loop (0) that
// both the CPU and level allow runs it (level < 2 only in tests, which
// check every path the CPU has against the Go loop).
void goddp_adam_f32(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                    int decay, float a, float b1, float omb1, float b2, float omb2, float invBc2, float eps, float step,
                    int level) {
	adam_consts_t c = {a, b1, omb1, b2, omb2, invBc2, eps, step};
	if (level >= 2 && __builtin_cpu_supports("avx512f"))
		adam_avx512(p, g, m, v, n, decay != 0, c);
	else if (level >= 1 && __builtin_cpu_supports("avx"))
		adam_avx(p, g, m, v, n, decay != 0, c);
	else
		adam_tail(p, g, m, v, 0, n, decay != 0, c);
}
