// transpose16 for the AVX-512 kernels (gemm_small_kernels.c's op(B)
// copies and flash_fused_kernels.c's K panels): the 16×16 float block at
// src (rows lds apart) written transposed to dst (rows ldd apart) with
// 32-bit, 64-bit and two 128-bit shuffle stages. A scalar copy of op(B)
// cost as much as the product it serves.

#ifndef GODDP_TRANSPOSE16_H
#define GODDP_TRANSPOSE16_H

#include <immintrin.h>
#include <stdint.h>

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

#endif

