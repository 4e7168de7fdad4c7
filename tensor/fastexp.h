// e**y for the C kernels, fastmath.go's expReduce and expm1Poly: y = k·ln2
// + r with |r| <= ln2/2, 2**k built from the bits of k, and e**r - 1 from
// a polynomial fit for relative error (max 2.3e-10). The caller clamps y
// so that 2**k stays a normal double (y in about [-708, 709]).

#ifndef GODDP_FASTEXP_H
#define GODDP_FASTEXP_H

#include <stdint.h>
#include <string.h>

static inline double bits_to_double(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline uint64_t double_to_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

static inline double goddp_exp(double y) {
	const double log2e = 1.44269504088896340736, ln2 = 0.693147180559945309417;
	const double shifter = 0x1.8p52 + 1023;
	double kf = y * log2e + shifter;
	double s = bits_to_double(double_to_bits(kf) << 52);
	double r = y - (kf - shifter) * ln2;
	double r2 = r * r;
	double m = r * ((1.0000000000312237 + 0.5000000046680004 * r) + r2 * (0.16666666249338286 + 0.041666354325215704 * r) +
	                r2 * r2 * ((0.008333402933959448 + 0.0013941015328067642 * r) + r2 * 0.00019841247011729895));
	return s + s * m;
}

#endif
