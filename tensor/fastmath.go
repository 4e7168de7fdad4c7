package tensor

import (
	"fmt"
	"math"
)

// Fast float32 activations.
//
// The float32 elementwise ops used to convert each element to float64 and
// call math.Exp, math.Tanh or math.Erf: a call per element, special-case
// branches inside, and for Erf a dozen branches choosing a rational
// approximation. The kernels below keep float64 for the arithmetic (it is
// as fast as float32 on scalar SSE, and its 29 spare bits absorb the
// rounding of the polynomials, so results stay within 0.55 float32 ulp of
// float64 math; fastmath_test.go sweeps every 97th bit pattern) but are
// branch-free straight-line code the compiler inlines into the loop:
// clamping with the min/max builtins (MINSD sequences, NaN-propagating),
// exponent arithmetic on the bits, Estrin polynomials. NaN in gives NaN out
// because every path carries the input into the result; infinities and huge
// inputs are clamped to a range whose result already saturates in float32
// (0, 1, ±1, +Inf), so the ends are exact.
//
// Each loop lets its float32 input die at the conversion to float64, which
// the compiler then does in place (CVTSS2SD X0, X0). Converting into another
// register merges into that register's old contents, which chains every
// element to the previous one's last instruction and made GELU twice as
// slow; so signs are read from the float64, not from the float32 input.
//
// Float64 tensors keep math.*: they serve finite-difference gradient
// checks, where the last bits matter more than speed.

// expReduce and expm1Poly split e**y = s·(1+m): s = 2**k and m = e**r - 1
// with r = y - k·ln2 in [-ln2/2, ln2/2]. Keeping m apart gives expm1
// without cancellation, e**y - 1 = (s-1) + s·m. They are two functions
// because one would exceed the inliner's budget, and a call per element
// costs more than the arithmetic. Callers clamp y to [-700, 700] so that
// 2**k is a normal float64.
func expReduce(y float64) (s, r float64) {
	const (
		log2e = 1.44269504088896340736
		ln2   = 0.693147180559945309417
		// Adding 1.5·2**52 rounds to an integer k and leaves it, two's
		// complement, in the low mantissa bits; the extra 1023 is the
		// exponent bias, so those bits shifted up are 2**k.
		shifter = 0x1.8p52 + 1023
	)
	kf := y*log2e + shifter
	s = math.Float64frombits(math.Float64bits(kf) << 52)
	return s, y - (kf-shifter)*ln2
}

// expm1Poly is e**r - 1 on |r| <= ln2/2, fit for relative error
// (Lawson-weighted least squares on Chebyshev nodes): max 2.3e-10, 1/250 of
// a float32 ulp. Estrin's scheme rather than Horner's: the loops are
// latency-bound, and pairing the terms halves the chain of dependent
// operations.
func expm1Poly(r float64) float64 {
	r2 := r * r
	return r * ((1.0000000000312237 + 0.5000000046680004*r) + r2*(0.16666666249338286+0.041666354325215704*r) +
		r2*r2*((0.008333402933959448+0.0013941015328067642*r)+r2*0.00019841247011729895))
}

// Φ(-a) = ½·erfc(a/√2) for a in [0, 15] is computed as ½·t·R(t)·e**(-a²/2)
// with t = 3√2/(3√2+a), from erfc(z) = t·e**(-z²)·R(t), t = 1/(1+z/3):
// R is smooth and bounded on that t-range, so one polynomial covers it
// without picking intervals (or branching on them), and e**(-a²/2), which
// GELU's gradient reuses for the density, is exact in its argument (a²/2 of
// a float32 a fits float64's mantissa). The product keeps a relative error
// of about 2.5e-9 however small it gets, down to float32's subnormals.
// The pieces are separate functions because together they exceed the
// inliner's budget, and a call per element is what this file avoids.
const phiT = 4.24264068711928514640 // 3·√2

// phiR is R(t), fit for relative error on t in [0.2205, 1], i.e. a in
// [0, 15] (Lawson-weighted least squares on Chebyshev nodes): max 2.5e-9.
func phiR(t float64) float64 {
	t2 := t * t // Estrin's scheme, as in expm1Poly
	t4 := t2 * t2
	return (0.18803819380605272 + 0.1886396521879215*t) + t2*(0.17180392408181497+0.19040901609418634*t) +
		t4*((0.0030095993300631274+0.394463813793257*t)+t2*(-0.43043480722524263+0.5277518793223546*t)) +
		t4*t4*(-0.28878250848677395+0.05510123455254085*t)
}

// geluClamp bounds |x| for GELU: beyond 15, xΦ(x) is x to float32
// precision on the right and rounds to -0 on the left (15·Φ(-15) ≈ 5e-50),
// and so does the gradient (1 and 0).
const geluClamp = 15

// unitIfPositive returns 1 if x's sign bit is clear, else 0, without a
// branch (int64 to float64 converts in one instruction; uint64 would not).
func unitIfPositive(x float64) float64 {
	return float64(1 - int64(math.Float64bits(x)>>63))
}

func checkLen(op string, dst []float32, src ...[]float32) {
	for _, s := range src {
		if len(s) != len(dst) {
			panic(fmt.Sprintf("tensor: %s: lengths %d and %d differ", op, len(dst), len(s)))
		}
	}
}

// ExpF32 writes e**src[i] to dst[i]; dst may alias src. It overflows to
// +Inf above 88.72 and underflows through the subnormals to 0 below -103.97,
// as float32(math.Exp(x)) does, within 1 ulp.
func ExpF32(dst, src []float32) {
	checkLen("ExpF32", dst, src)
	dst = dst[:len(src)]
	for i, v := range src {
		// The clamp keeps 2**k normal; e**89 and e**-104 already round to
		// +Inf and 0 in float32.
		s, r := expReduce(min(max(float64(v), -104), 89))
		m := expm1Poly(r)
		dst[i] = float32(s + s*m)
	}
}

// SigmoidF32 writes 1/(1+e**-src[i]) to dst[i]; dst may alias src. It is
// accurate relative to the result on both tails (no 1-p cancellation).
func SigmoidF32(dst, src []float32) {
	checkLen("SigmoidF32", dst, src)
	dst = dst[:len(src)]
	for i, v := range src {
		// σ(x) is exactly 1 in float32 from x = 17.33 on and 0 below -103.97;
		// the clamp reaches past both.
		s, r := expReduce(min(max(-float64(v), -40), 110))
		m := expm1Poly(r)
		dst[i] = float32(1 / (1 + (s + s*m)))
	}
}

// TanhF32 writes tanh(src[i]) to dst[i]; dst may alias src. It computes
// tanh|x| = -u/(2+u) with u = e**(-2|x|) - 1 taken from expm1Poly, which
// has no cancellation, so tiny inputs keep their relative accuracy, and it
// restores the sign (including -0) from the input's bits.
func TanhF32(dst, src []float32) {
	checkLen("TanhF32", dst, src)
	dst = dst[:len(src)]
	for i, v := range src {
		x := float64(v)
		sign := uint32(math.Float64bits(x)>>32) & (1 << 31)
		// tanh(x) rounds to 1 in float32 from x = 9.01 on.
		s, r := expReduce(-2 * min(max(x, -x), 20))
		m := expm1Poly(r)
		u := (s - 1) + s*m
		t := float32(-u / (2 + u))
		dst[i] = math.Float32frombits(math.Float32bits(t)&^(1<<31) | sign)
	}
}

// GELUF32 writes the exact GELU x·Φ(x) = ½x(1+erf(x/√2)) of src[i] to
// dst[i] (torch's default, not the tanh approximation); dst may alias src.
// Φ(x) for negative x is computed as ½erfc(|x|/√2) directly, so the left
// tail is accurate relative to its (tiny) size, where 1+erf(x/√2) cancels.
// GELU(+Inf) = +Inf and GELU(-Inf) = -0.
func GELUF32(dst, src []float32) {
	checkLen("GELUF32", dst, src)
	dst = dst[:len(src)]
	if len(src) >= geluCMin && geluC(dst, src) {
		return
	}
	geluF32Go(dst, src)
}

// geluF32Go is GELUF32's Go loop; builds with cgo run the same algorithm
// vectorised in C (gelu_kernels.c) from geluCMin elements up.
func geluF32Go(dst, src []float32) {
	for i, v := range src {
		x := float64(v)
		p, _ := geluCDF(x)
		dst[i] = float32(max(x, -geluClamp) * p)
	}
}

// geluCDF returns Φ(x) and e**(-a²/2) for a = min(|x|, geluClamp), the
// parts GELU and its derivative share. Φ(-a) = q comes from erfc, and
// Φ(x) = q for x < 0 and 1-q otherwise, selected arithmetically: q +
// 0·(1-2q) returns q bit for bit, with its relative accuracy.
func geluCDF(x float64) (p, e float64) {
	a := min(max(x, -x), geluClamp)
	t := phiT / (phiT + a)
	s, r := expReduce(-0.5 * a * a)
	e = s + s*expm1Poly(r)
	q := 0.5 * t * phiR(t) * e
	return q + unitIfPositive(x)*(1-2*q), e
}

// GELUGradF32 writes gy[i]·GELU'(x[i]) = gy[i]·(Φ(x) + x·φ(x)) to dst[i],
// the backward of GELUF32; dst may alias gy or x. The gradient is 1 at
// +Inf and 0 at -Inf.
func GELUGradF32(dst, gy, x []float32) {
	checkLen("GELUGradF32", dst, gy, x)
	dst, gy = dst[:len(x)], gy[:len(x)]
	if len(x) >= geluCMin && geluGradC(dst, gy, x) {
		return
	}
	geluGradF32Go(dst, gy, x)
}

// GELUWithGradF32 writes GELU(src[i]) to dst[i], as GELUF32 does, and its
// derivative Φ(x) + x·φ(x), rounded to float32, to grad[i]: the forward
// of a GELU whose input needs a gradient, so that the backward is the
// product GELUBackwardF32 instead of a second evaluation of Φ and φ.
// dst may alias src; grad may not alias either.
func GELUWithGradF32(dst, grad, src []float32) {
	checkLen("GELUWithGradF32", dst, grad, src)
	if len(src) >= geluCMin && geluWithGradC(dst, grad, src) {
		return
	}
	geluWithGradF32Go(dst, grad, src)
}

func geluWithGradF32Go(dst, grad, src []float32) {
	const invSqrt2Pi = 0.39894228040143267794
	for i, v := range src {
		x := float64(v)
		p, e := geluCDF(x)
		xc := max(x, -geluClamp)
		dst[i] = float32(xc * p)
		grad[i] = float32(p + min(xc, geluClamp)*invSqrt2Pi*e)
	}
}

// GELUBackwardF32 writes gy[i]·grad[i] to gx[i], grad being the derivative
// GELUWithGradF32 wrote: GELU's backward. gx may alias gy.
func GELUBackwardF32(gx, gy, grad []float32) {
	checkLen("GELUBackwardF32", gx, gy, grad)
	binVV(opMul, gx, gy, grad)
}

func geluGradF32Go(dst, gy, x []float32) {
	const invSqrt2Pi = 0.39894228040143267794
	for i, v := range x {
		p, e := geluCDF(float64(v))
		xf := min(max(float64(v), -geluClamp), geluClamp)
		dst[i] = float32(float64(gy[i]) * (p + xf*invSqrt2Pi*e))
	}
}
