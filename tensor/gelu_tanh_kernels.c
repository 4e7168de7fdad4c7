//go:build cgo && !noblas

// GELU's tanh approximation (GPT-2's activation) and its derivative for
// float32, the algorithm of gelu_tanh.go's geluTanhF32Go, written so that
// GCC vectorises it: Go compiles that loop to scalar SSE, where it cost 8%
// of a GPT-2 124M step. target_clones builds AVX-512, AVX2+FMA and
// baseline versions and picks one at load time by the CPU.
//
// The arithmetic is float64 (8 lanes to an AVX-512 vector): with
// s = σ(2u) = ½(1 + tanh u), u = √(2/π)(x + 0.044715x³),
//
//	y = x·s,  GELU'(x) = s·(1 + 2√(2/π)·x·(1 - s)·(1 + 3·0.044715x²)),
//
// where s and 1 - s both come from w = e**(-2|u|) ≤ 1 as 1/(1+w) and
// w/(1+w), so neither tail cancels (½x(1 + tanh u) loses every digit of
// the left tail in float32), and e**(-2|u|) keeps u's float64 accuracy,
// which a float32 u would lose 2|u|-fold. Every operation rounds as the Go
// loop's does: contraction into FMA is off, so the two give the same bits
// (TestGELUTanhKernelsMatchGoLoop).

#pragma GCC optimize("O3", "no-trapping-math", "fp-contract=off")

#include <math.h>
#include <stdint.h>

#include "fastexp.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

// gtBeta2 and gtKappa3 are 2·√(2/π) and 3·0.044715 written out, so that
// the Go loop's constants round to the same doubles.
static const double gtBeta = 0.7978845608028654, gtKappa = 0.044715, gtBeta2 = 1.5957691216057308, gtKappa3 = 0.134145,
                    gtClamp = 20;

// gelu_tanh_parts returns s = σ(2u) and writes 1 - s and the clamped x.
// Beyond |x| = 20 the results are saturated in float32 (y = x or -0,
// GELU' = 1 or -0) and the clamp keeps e**(-2|u|) normal (|u| ≤ 302) and
// x·(1-s) finite at ±Inf. The comparisons let NaN through every clamp.
static inline double gelu_tanh_parts(double x, double *oms, double *xc) {
	double xl = -gtClamp > x ? -gtClamp : x; // (MAXPD's operand order: NaN gives x)
	double c = gtClamp < xl ? gtClamp : xl;
	double u = gtBeta * (c + gtKappa * c * c * c);
	double a = fabs(u);
	double w = goddp_exp(-2 * a);
	double q = 1 / (1 + w);
	double wq = w * q;
	*oms = x < 0 ? q : wq;
	*xc = c;
	return x < 0 ? wq : q;
}

// gelu_tanh_value is x·s, x clamped on the left only: y(-Inf) = -0,
// y(+Inf) = +Inf.
static inline float gelu_tanh_value(double x, double s) {
	double xl = -gtClamp > x ? -gtClamp : x;
	return (float)(xl * s);
}

static inline float gelu_tanh_deriv(double s, double oms, double c) {
	return (float)(s * (1 + gtBeta2 * c * oms * (1 + gtKappa3 * c * c)));
}

CLONES void goddp_gelu_tanh_f32(float *dst, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		double x = src[i], oms, c;
		double s = gelu_tanh_parts(x, &oms, &c);
		dst[i] = gelu_tanh_value(x, s);
	}
}

// GELU and its derivative in one pass: the forward of an input that needs
// a gradient, so that the backward is one product.
CLONES void goddp_gelu_tanh_with_grad_f32(float *dst, float *grad, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		double x = src[i], oms, c;
		double s = gelu_tanh_parts(x, &oms, &c);
		dst[i] = gelu_tanh_value(x, s);
		grad[i] = gelu_tanh_deriv(s, oms, c);
	}
}

// dx = dy·GELU'(x), the derivative rounded to float32 first, so that it
// equals the product of goddp_gelu_tanh_with_grad_f32's derivative and dy.
CLONES void goddp_gelu_tanh_grad_f32(float *dst, const float *gy, const float *x, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		double v = x[i], oms, c;
		double s = gelu_tanh_parts(v, &oms, &c);
		dst[i] = gy[i] * gelu_tanh_deriv(s, oms, c);
	}
}
