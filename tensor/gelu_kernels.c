//go:build cgo && !noblas

// GELU and its gradient for float32, the algorithm of fastmath.go's
// geluF32Go, geluGradF32Go and geluWithGradF32Go, written so that GCC
// vectorises it: Go compiles those loops to scalar SSE, where they cost
// about as much as a transformer's GEMMs. target_clones builds AVX-512,
// AVX2+FMA and baseline versions and picks one at load time by the CPU.
//
// The arithmetic is float32, 16 lanes to an AVX-512 vector where float64
// had 8 (the kernels are bound by arithmetic, not by memory: GELU and its
// derivative cost about 2.3 ns an element in float64 on a Zen 4 core).
// Every operation rounds as the Go loop's does: contraction into FMA is
// off, and the one fmaf (the exact error of a·a) is exact in both, so the
// two give the same bits (TestGELUKernelsMatchGoLoops).

#pragma GCC optimize("O3", "no-trapping-math", "fp-contract=off")

#include <math.h>
#include <stdint.h>
#include <string.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static const float phiT = 3, geluClamp = 15, invSqrt2Pi = 0.39894228040143267794f;

// The parts of Φ(-a) = ½·t·R(t)·e**(-a²/2), a = min(|x|, geluClamp), that
// GELU and its derivative share: qs = ½·t·R(t)·m and m, with e**(-a²/2) =
// m·s1·s2. The scale 2**k is kept apart as two normal factors s1 and s2
// (k reaches -163, below float32's normals) so that only the last product
// rounds into the subnormals. m includes the rounding error of a·a (err,
// exact by fmaf), to first order: e**(-(p+err)/2) = e**(-p/2)·(1 - err/2).
typedef struct {
	float qs, m, s1, s2;
} gelu_parts_t;

static inline gelu_parts_t gelu_parts(float x) {
	const float log2e = 1.44269504088896340736f, shifter = 12582912.0f; // 1.5·2**23
	const float ln2hi = 0.693145751953125f, ln2lo = 1.42860682030941723212e-06f;
	float a = x < 0 ? -x : x;
	a = a > geluClamp ? geluClamp : a;
	float t = phiT / (phiT + a);
	float t2 = t * t, t4 = t2 * t2;
	float r_t = (0.2659645190492568f + 0.26586482507629566f * t) + t2 * (0.23776639838261965f + 0.16639493853700738f * t) +
	            t4 * ((0.15439506963329813f + -0.1708335592035225f * t) + t2 * (0.4018684637113071f + -0.7062349092564715f * t)) +
	            t4 * t4 * ((0.5784336672983864f + -0.2308173986000828f * t) + t2 * 0.03719798630918502f);
	float p = a * a;
	float err = fmaf(a, a, -p);
	float y = -0.5f * p;
	float kf = y * log2e + shifter;
	float k = kf - shifter;
	float r = (y - k * ln2hi) - k * ln2lo;
	float r2 = r * r;
	float em1 = r * ((1.0000000000312237f + 0.5000000046680004f * r) + r2 * (0.16666666249338286f + 0.041666354325215704f * r) +
	                 r2 * r2 * ((0.008333402933959448f + 0.0013941015328067642f * r) + r2 * 0.00019841247011729895f));
	float m = 1 + em1;
	m = m - m * (0.5f * err);
	int32_t ki = (int32_t)(f32_bits(kf) - f32_bits(shifter));
	int32_t k1 = ki >> 1, k2 = ki - k1;
	gelu_parts_t g;
	g.s1 = bits_f32((uint32_t)(k1 + 127) << 23);
	g.s2 = bits_f32((uint32_t)(k2 + 127) << 23);
	g.m = m;
	g.qs = (0.5f * t) * r_t * m;
	return g;
}

static inline float gelu_value(float x, gelu_parts_t g) {
	float xc = x < -geluClamp ? -geluClamp : x;
	float q = g.qs * g.s1 * g.s2;
	float neg = xc * g.qs * g.s1 * g.s2; // x·Φ(x) = x·q, rounded once into the subnormals
	float pos = xc * (1 - q);
	return x < 0 ? neg : pos;
}

static inline float gelu_deriv(float x, gelu_parts_t g) {
	float xc = x < -geluClamp ? -geluClamp : x;
	float xf = xc > geluClamp ? geluClamp : xc;
	float xphi = xf * invSqrt2Pi * g.m; // x·φ(x) before the scale
	float neg = (g.qs + xphi) * g.s1 * g.s2;
	float pos = (1 - g.qs * g.s1 * g.s2) + xphi * g.s1 * g.s2;
	return x < 0 ? neg : pos;
}

// The comparisons are written so that NaN passes through every clamp.
CLONES void goddp_gelu_f32(float *dst, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		float x = src[i];
		dst[i] = gelu_value(x, gelu_parts(x));
	}
}

CLONES void goddp_gelu_grad_f32(float *dst, const float *gy, const float *x, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		dst[i] = gy[i] * gelu_deriv(v, gelu_parts(v));
	}
}

// GELU and its derivative in one pass (GELUWithGradF32): the forward of a
// GELU whose input needs a gradient computes t, e and Φ anyway, and the
// derivative Φ(x) + x·φ(x) costs a few more operations on them, where the
// backward would compute them all again.
CLONES void goddp_gelu_with_grad_f32(float *dst, float *grad, const float *src, int64_t n) {
	for (int64_t i = 0; i < n; i++) {
		float x = src[i];
		gelu_parts_t g = gelu_parts(x);
		dst[i] = gelu_value(x, g);
		grad[i] = gelu_deriv(x, g);
	}
}

// An activation's backward folded into the float32 Linear before it: y = x
// ⊙ s, whose rows are added to d (d[c] += y[r][c], rows in order, as
// goddp_add_rows_f32 sums them), one pass where the multiply and the bias
// gradient's sums each read the product. The same bits as the two.
CLONES void goddp_mul_add_rows_f32(float *y, const float *x, const float *s,
                                   float *d, int64_t rows, int64_t cols) {
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols, *sr = s + r * cols;
		float *yr = y + r * cols;
		for (int64_t c = 0; c < cols; c++) {
			float v = xr[c] * sr[c];
			yr[c] = v;
			d[c] += v;
		}
	}
}
