//go:build cgo && !noblas

// torch's mt19937 (mt19937.go) drawing a run of float64 uniforms at a time
// (RNG.Float64s), and a float32 Dropout's mask and output in the same pass
// (RNG.DropoutF32). The convnet's Dropout(0.4) on [64, 1024] took 0.90-1.13
// ms with a call per output, 0.39-0.57 ms drawing blocks in Go, and
// 0.11-0.17 ms here (autograd's BenchmarkDropout, interleaved). The
// state's regeneration and the tempering are plain loops over arrays,
// which GCC vectorises: the
// twist's reads reach 1 and 397 words ahead (not yet rewritten in this
// pass) or 227 behind (already rewritten), so vectors of 16 see the values
// the one-at-a-time loop does. The sequence and the left/next bookkeeping
// are mt19937.go's, word for word.

#pragma GCC optimize("O3")

#include <stdint.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

enum { mtN = 624, mtM = 397 };

static inline uint32_t mt_twist(uint32_t u, uint32_t v) {
	return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((0u - (v & 1u)) & 0x9908b0dfu);
}

static inline uint32_t mt_temper(uint32_t y) {
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

static void mt_regen(uint32_t *restrict s) {
	for (int j = 0; j < mtN - mtM; j++)
		s[j] = s[j + mtM] ^ mt_twist(s[j], s[j + 1]);
	for (int j = mtN - mtM; j < mtN - 1; j++)
		s[j] = s[j + mtM - mtN] ^ mt_twist(s[j], s[j + 1]);
	s[mtN - 1] = s[mtM - 1] ^ mt_twist(s[mtN - 1], s[0]);
}

// mt_fill is mt19937.fill: n outputs into dst.
static void mt_fill(uint32_t *restrict s, int32_t *left, uint32_t *next, uint32_t *restrict dst, int64_t n) {
	while (n > 0) {
		if (*left == 1) { // the next output regenerates and is state[0]
			mt_regen(s);
			*left = mtN;
			dst[0] = mt_temper(s[0]);
			*next = 1;
			dst++, n--;
			continue;
		}
		int64_t k = *left - 1;
		if (k > n)
			k = n;
		const uint32_t *src = s + *next;
		for (int64_t i = 0; i < k; i++)
			dst[i] = mt_temper(src[i]);
		*next += (uint32_t)k;
		*left -= (int32_t)k;
		dst += k, n -= k;
	}
}

// goddp_mt_uniform64 writes n uniforms in [0, 1) to dst as RNG.Float64
// draws them: 53 bits of two outputs, the first as the high word.
CLONES void goddp_mt_uniform64(uint32_t *state, int32_t *left, uint32_t *next, double *dst, int64_t n) {
	uint32_t buf[512];
	while (n > 0) {
		int64_t k = n < 256 ? n : 256;
		mt_fill(state, left, next, buf, 2 * k);
		for (int64_t i = 0; i < k; i++) {
			uint64_t r = ((uint64_t)buf[2 * i] << 32) | buf[2 * i + 1];
			dst[i] = (double)(int64_t)(r & ((1ull << 53) - 1)) * 0x1p-53;
		}
		dst += k, n -= k;
	}
}

// goddp_mt_dropout_f32 is RNG.DropoutF32: one uniform per element, drawn as
// goddp_mt_uniform64 draws it; kept where it is below keep (mask = scale,
// y = x·scale), dropped elsewhere (mask = 0, y = x·0). keep > 0.
CLONES void goddp_mt_dropout_f32(uint32_t *state, int32_t *left, uint32_t *next, float *restrict y,
                                 float *restrict mask, const float *restrict x, int64_t n, double keep, float scale) {
	double u[256];
	while (n > 0) {
		int64_t k = n < 256 ? n : 256;
		goddp_mt_uniform64(state, left, next, u, k);
		for (int64_t i = 0; i < k; i++) {
			float s = u[i] < keep ? scale : 0.0f;
			mask[i] = s;
			y[i] = x[i] * s;
		}
		y += k, mask += k, x += k, n -= k;
	}
}
