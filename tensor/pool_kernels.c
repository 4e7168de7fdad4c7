//go:build cgo && !noblas

// 2x2, stride-2 max pooling for float32 (autograd's MaxPool2d in a
// convnet), written so that GCC vectorises it: the Go loop branches on
// every comparison, and data-dependent branches mispredict about half the
// time, so it ran at a fraction of memory bandwidth. Here every choice is
// a select. Each output takes the first maximum of its window in row-major
// order, and a NaN (the last one) wins, as in the general loop and torch's
// CPU kernel ("val > maxval || isnan(val)"); idx gets
// the winner's offset in its [h, w] plane. target_clones builds AVX-512,
// AVX2 and baseline versions, picked at load time by the CPU; all give the
// same results (only comparisons and copies).

#pragma GCC optimize("O3")

#include <stdint.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

CLONES void goddp_maxpool2x2_f32(float *restrict y, int32_t *restrict idx, const float *restrict x, int64_t planes,
                                 int64_t h, int64_t w) {
	int64_t oh = h / 2, ow = w / 2;
	for (int64_t p = 0; p < planes; p++) {
		const float *xp = x + p * h * w;
		float *yp = y + p * oh * ow;
		int32_t *ip = idx + p * oh * ow;
		for (int64_t oy = 0; oy < oh; oy++) {
			const float *r0 = xp + 2 * oy * w, *r1 = r0 + w;
			int32_t b0 = (int32_t)(2 * oy * w), b1 = b0 + (int32_t)w;
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
				yp[oy * ow + ox] = best;
				ip[oy * ow + ox] = bi;
			}
		}
	}
}
