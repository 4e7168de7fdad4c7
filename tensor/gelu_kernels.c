//go:build cgo && !noblas

// GELU and its gradient for float32, the algorithm of fastmath.go's
// GELUF32/GELUGradF32 (float64 arithmetic, erfc through t·R(t)·e**(-a²/2),
// branch-free) written so that GCC vectorises it: Go compiles those loops
// to scalar SSE, where they cost about as much as a transformer's GEMMs.
// target_clones builds AVX-512, AVX2+FMA and baseline versions and picks
// one at load time by the CPU. With FMA the roundings differ from the Go
// loops in the last bits of float64, far below float32's ulp.

#pragma GCC optimize("O3", "no-trapping-math")

#include <stdint.h>
#include <string.h>

#include "fastexp.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

// e**y = s·(1 + m) for y in [-113, 0]; see expReduce and expm1Poly.
static inline double exp_neg(double y) { return goddp_exp(y); }

static inline double phi_r(double t) {
	double t2 = t * t, t4 = t2 * t2;
	return (0.18803819380605272 + 0.1886396521879215 * t) + t2 * (0.17180392408181497 + 0.19040901609418634 * t) +
	       t4 * ((0.0030095993300631274 + 0.394463813793257 * t) + t2 * (-0.43043480722524263 + 0.5277518793223546 * t)) +
	       t4 * t4 * (-0.28878250848677395 + 0.05510123455254085 * t);
}

static const double phiT = 4.24264068711928514640, geluClamp = 15;

// 1 for x >= 0, else 0 (a blend; at x = -0, where the Go loop reads the
// sign bit, q = ½ makes both choices equal).
static inline double unit_if_positive(double x) { return x < 0 ? 0.0 : 1.0; }

// min(|x|, geluClamp). Every kernel takes |x| from x itself, before any
// other clamp: GCC vectorised the gradient, which took it from x clamped
// on both sides, with every operation after it twice (1.8 ns an element
// against the forward's 0.9, at AVX-512).
static inline double abs_clamped(double x) {
	double a = x < 0 ? -x : x;
	return a > geluClamp ? geluClamp : a;
}

// gelu_cdf returns Φ(x) and sets *e = e**(-a²/2), a = min(|x|, geluClamp):
// the parts GELU and its derivative share.
static inline double gelu_cdf(double x, double *e) {
	double a = abs_clamped(x);
	double t = phiT / (phiT + a);
	*e = exp_neg(-0.5 * a * a);
	double q = 0.5 * t * phi_r(t) * *e;
	return q + unit_if_positive(x) * (1 - 2 * q);
}

// The comparisons are written so that NaN passes through every clamp.
CLONES void goddp_gelu_f32(float *dst, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		double x = src[i], e;
		double p = gelu_cdf(x, &e);
		double xc = x < -geluClamp ? -geluClamp : x;
		dst[i] = (float)(xc * p);
	}
}

CLONES void goddp_gelu_grad_f32(float *dst, const float *gy, const float *x, int64_t n) {
	const double invSqrt2Pi = 0.39894228040143267794;
	for (int64_t i = 0; i < n; i++) {
		double v = x[i], e;
		double p = gelu_cdf(v, &e);
		double xf = v < -geluClamp ? -geluClamp : v;
		xf = xf > geluClamp ? geluClamp : xf;
		dst[i] = (float)((double)gy[i] * (p + xf * invSqrt2Pi * e));
	}
}

// GELU and its derivative in one pass (GELUWithGradF32): the forward of a
// GELU whose input needs a gradient computes t, e and Φ anyway, and the
// derivative Φ(x) + x·φ(x) costs two more operations on them, where the
// backward would compute them all again.
CLONES void goddp_gelu_with_grad_f32(float *dst, float *grad, const float *src, int64_t n) {
	const double invSqrt2Pi = 0.39894228040143267794;
	for (int64_t i = 0; i < n; i++) {
		double x = src[i], e;
		double p = gelu_cdf(x, &e);
		double xc = x < -geluClamp ? -geluClamp : x;
		dst[i] = (float)(xc * p);
		double xf = xc > geluClamp ? geluClamp : xc;
		grad[i] = (float)(p + xf * invSqrt2Pi * e);
	}
}
