//go:build cgo && !noblas

// SGD with momentum for float32 in one pass over memory (SGDStep). The
// update was three axpy passes (buf *= momentum, buf += d, w -= lr*buf):
// eight streams of a parameter's size (each pass reads and writes buf, and
// the last reads and writes w), where one pass reads w, g and buf and
// writes w and buf: five. A convnet's Linear(3136, 1024) is 12.8 MB a
// stream, so the step is bound by memory traffic, not arithmetic.
//
// The arithmetic is torch's SGD, operation by operation (torch 1.13's
// _single_tensor_sgd on the CPU, whose add with alpha is a fused
// multiply-add): d = ±g, then d += wd·w; buf = d at the first step, else
// buf = buf·momentum, then buf += (1 - dampening)·d; then w += -lr·buf.
// fp-contract is off so that the compiler fuses nothing else.

#pragma GCC optimize("O3", "fp-contract=off")

#include <math.h>
#include <stdint.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

CLONES void goddp_sgd_momentum_f32(float *restrict w, const float *restrict g, float *restrict buf, int64_t n,
                                   float lr, float momentum, float damp, float wd, float sign, int first) {
	for (int64_t i = 0; i < n; i++) {
		float d = wd != 0 ? fmaf(wd, w[i], sign * g[i]) : sign * g[i];
		float b = first ? d : fmaf(damp, d, buf[i] * momentum);
		buf[i] = b;
		w[i] = fmaf(-lr, b, w[i]);
	}
}
