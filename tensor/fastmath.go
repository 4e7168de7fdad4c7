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
// GELU is the exception: its C kernel is vectorised (gelu_kernels.c), and
// there float32 arithmetic fills twice the lanes, so GELU computes in
// float32 in both languages (geluParts), within 8 ulps.
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
// with t = 3/(3+a): R is smooth and bounded on that t-range, so one
// polynomial covers it without picking intervals (or branching on them),
// and e**(-a²/2), which GELU's gradient reuses for the density, is
// corrected for the rounding of a² (computed exactly), so the left tail
// keeps its relative accuracy down to float32's subnormals. The arithmetic
// is float32 (see geluParts).
const phiT = 3

// phiR is R(t), fit for relative error on t in [0.1667, 1], i.e. a in
// [0, 15] (Lawson-weighted least squares on Chebyshev nodes): max 9.4e-10
// in exact arithmetic. t = 3/(3+a) rather than 3√2/(3√2+a): R's relative
// sensitivity to the rounding of t, 1 + t·R'/R, is at most 2.4 against 3.4.
func phiR(t float32) float32 {
	t2 := t * t // Estrin's scheme, as in expm1Poly
	t4 := t2 * t2
	return (0.2659645190492568 + 0.26586482507629566*t) + t2*(0.23776639838261965+0.16639493853700738*t) +
		t4*((0.15439506963329813+-0.1708335592035225*t)+t2*(0.4018684637113071+-0.7062349092564715*t)) +
		t4*t4*((0.5784336672983864+-0.2308173986000828*t)+t2*0.03719798630918502)
}

// geluClamp bounds |x| for GELU: beyond 15, xΦ(x) is x to float32
// precision on the right and rounds to -0 on the left (15·Φ(-15) ≈ 5e-50),
// and so does the gradient (1 and 0).
const geluClamp = 15

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
// vectorised in C (gelu_kernels.c) from geluCMin elements up, to the bit.
func geluF32Go(dst, src []float32) {
	for i, x := range src {
		dst[i] = geluValue(x, geluParts(x))
	}
}

// geluPartsT are the parts of Φ(-a) = ½·t·R(t)·e**(-a²/2), a = min(|x|,
// geluClamp), that GELU and its derivative share: qs = ½·t·R(t)·m and m,
// with e**(-a²/2) = m·s1·s2. The scale 2**k is kept apart as two normal
// factors s1 and s2 (k reaches -163, below float32's normals) so that only
// the last product rounds into the subnormals.
type geluPartsT struct{ qs, m, s1, s2 float32 }

// geluParts computes them in float32 arithmetic, each operation rounded
// (the explicit conversions keep the compiler from fusing a product into
// an addition, so that gelu_kernels.c, compiled without contraction, gives
// the same bits). m includes the rounding error of p = a·a, which float64
// gives exactly (as fmaf does in C), to first order: e**(-(p+err)/2) =
// e**(-p/2)·(1 - err/2).
//
// The results are within 8 float32 ulps of float64 math (fastmath_test.go
// sweeps every 97th bit pattern; about 7 near 0 and in the left tail,
// where the rounding of t is amplified by R's slope). The float64
// arithmetic before reached 1 ulp at twice the cost per element, in a
// kernel that took 5-6% of a GPT's step; torch's float32 GELU,
// ½x(1+erf(x/√2)), loses all relative accuracy in the left tail.
func geluParts(x float32) geluPartsT {
	const (
		log2e   = 1.44269504088896340736
		shifter = 12582912.0 // 1.5·2**23: adding it rounds to an integer k in the low bits
		ln2hi   = 0.693145751953125
		ln2lo   = 1.42860682030941723212e-06
	)
	a := x
	if a < 0 {
		a = -a
	}
	if a > geluClamp {
		a = geluClamp
	}
	t := phiT / (phiT + a)
	rt := phiR(t)
	p := float32(a * a)
	err := float32(float64(a)*float64(a) - float64(p))
	y := -0.5 * p
	kf := float32(y*log2e) + shifter
	k := kf - shifter
	r := float32(y-float32(k*ln2hi)) - float32(k*ln2lo)
	m := 1 + expm1Poly32(r)
	m = m - float32(m*float32(0.5*err))
	ki := int32(math.Float32bits(kf) - math.Float32bits(shifter))
	k1 := ki >> 1
	k2 := ki - k1
	return geluPartsT{
		qs: float32(float32(0.5*t)*rt) * m,
		m:  m,
		s1: math.Float32frombits(uint32(k1+127) << 23),
		s2: math.Float32frombits(uint32(k2+127) << 23),
	}
}

// expm1Poly32 is expm1Poly's polynomial in float32.
func expm1Poly32(r float32) float32 {
	r2 := r * r
	return r * ((1.0000000000312237 + float32(0.5000000046680004*r)) + float32(r2*(0.16666666249338286+float32(0.041666354325215704*r))) +
		float32(float32(r2*r2)*((0.008333402933959448+float32(0.0013941015328067642*r))+float32(r2*0.00019841247011729895))))
}

// geluValue is x·Φ(x): x·q on the left, rounded once into the subnormals,
// and x·(1-q) on the right. The comparisons let NaN through every clamp.
func geluValue(x float32, g geluPartsT) float32 {
	xc := x
	if xc < -geluClamp {
		xc = -geluClamp
	}
	if x < 0 {
		return float32(float32(xc*g.qs)*g.s1) * g.s2
	}
	q := float32(g.qs*g.s1) * g.s2
	return xc * (1 - q)
}

// geluDeriv is Φ(x) + x·φ(x), φ(x) = e**(-x²/2)/√(2π).
func geluDeriv(x float32, g geluPartsT) float32 {
	const invSqrt2Pi = 0.39894228040143267794
	xf := x
	if xf < -geluClamp {
		xf = -geluClamp
	}
	if xf > geluClamp {
		xf = geluClamp
	}
	xphi := float32(xf*invSqrt2Pi) * g.m
	if x < 0 {
		return float32(float32(g.qs+xphi)*g.s1) * g.s2
	}
	return (1 - float32(float32(g.qs*g.s1)*g.s2)) + float32(float32(xphi*g.s1)*g.s2)
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

// GELUInPlaceWithGrad replaces x's values with GELU(x) and returns a new
// tensor of its derivative at the old values (GELUWithGradF32), for x
// contiguous float32 on the host; elsewhere (a device, float64, a view) it
// returns nil and leaves x alone. A fused op whose GELU output is its own
// (autograd.LinearGELU) keeps the derivative for its backward.
func GELUInPlaceWithGrad(x *Tensor) *Tensor {
	if !x.IsCPU() || x.dtype != Float32 || !x.IsContiguous() {
		return nil
	}
	d := Empty(Float32, x.shape...)
	v := x.F32()[:x.Numel()]
	GELUWithGradF32(v, d.F32(), v)
	return d
}

func geluWithGradF32Go(dst, grad, src []float32) {
	for i, x := range src {
		g := geluParts(x)
		dst[i] = geluValue(x, g)
		grad[i] = geluDeriv(x, g)
	}
}

// GELUBackwardF32 writes gy[i]·grad[i] to gx[i], grad being the derivative
// GELUWithGradF32 wrote: GELU's backward. gx may alias gy.
func GELUBackwardF32(gx, gy, grad []float32) {
	checkLen("GELUBackwardF32", gx, gy, grad)
	binVV(opMul, gx, gy, grad)
}

func geluGradF32Go(dst, gy, x []float32) {
	for i, v := range x {
		dst[i] = gy[i] * geluDeriv(v, geluParts(v))
	}
}
