package tensor

import "math"

// torch 1.13 fills float32 tensors of 16 or more contiguous elements from
// N(mean, std) with its AVX2 kernel (normal_fill_16_AVX2), whose logarithm
// and sine/cosine are the Cephes-derived polynomials of avx_mathfun.h, not
// libm's. To draw the same bits, this file evaluates the same polynomials
// lane by lane in float32, operation for operation. GCC compiled torch's
// kernel with -mfma and floating-point contraction on, so a product whose
// only use is an addition became one fused multiply-add; fma32 reproduces
// each of those, and every other product is rounded on its own (the explicit
// float32 conversions stop Go from fusing on platforms where it may).

// fma32 returns a*b+c rounded once to float32, as vfmadd does. It is small
// enough to inline; the rare midpoint case is out of line.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact (24+24 significant bits); the conversion forbids fusing it into s
	s := p + float64(c)
	// Rounding s to float32 rounds p+c correctly unless s landed exactly on
	// a float32 midpoint (low 29 bits 1000...0) while p+c was not on it.
	if math.Float64bits(s)&(1<<29-1) == 1<<28 {
		s = fma32Midpoint(p, float64(c), s)
	}
	return float32(s)
}

// fma32Midpoint nudges s, the float64 sum of p and c sitting exactly on a
// float32 midpoint, one float64 ulp towards p+c (the sign of TwoSum's error),
// so that the conversion to float32 breaks no false tie.
//
//go:noinline
func fma32Midpoint(p, c, s float64) float64 {
	bb := s - p
	e := (p - (s - bb)) + (c - bb) // s+e == p+c exactly
	if e != 0 {
		bits := math.Float64bits(s)
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return s
}

var (
	avxSqrtHF = float32(float64(0.707106781186547524))
	avxLogP   = [9]float32{
		float32(float64(7.0376836292e-2)), float32(float64(-1.1514610310e-1)), float32(float64(1.1676998740e-1)),
		float32(float64(-1.2420140846e-1)), float32(float64(1.4249322787e-1)), float32(float64(-1.6668057665e-1)),
		float32(float64(2.0000714765e-1)), float32(float64(-2.4999993993e-1)), float32(float64(3.3333331174e-1)),
	}
	avxLogQ1 = float32(float64(-2.12194440e-4))
	avxLogQ2 = float32(float64(0.693359375))

	avxDP1   = float32(float64(-0.78515625))
	avxDP2   = float32(float64(-2.4187564849853515625e-4))
	avxDP3   = float32(float64(-3.77489497744594108e-8))
	avxSinP0 = float32(float64(-1.9515295891e-4))
	avxSinP1 = float32(float64(8.3321608736e-3))
	avxSinP2 = float32(float64(-1.6666654611e-1))
	avxCosP0 = float32(float64(2.443315711809948e-005))
	avxCosP1 = float32(float64(-1.388731625493765e-003))
	avxCosP2 = float32(float64(4.166664568298827e-002))
	avxFOPI  = float32(float64(1.27323954473516))
)

// avxLog is log256_ps for one lane.
func avxLog(x float32) float32 {
	invalid := x <= 0
	x = max(x, math.Float32frombits(0x00800000))
	bits := math.Float32bits(x)
	e := float32(int32(bits>>23) - 0x7f)
	x = math.Float32frombits(bits&^0x7f800000 | math.Float32bits(0.5))
	e = e + 1
	var tmp float32
	mask := x < avxSqrtHF
	if mask {
		tmp = x
	}
	x = x - 1
	if mask {
		e = e - 1
	}
	x = x + tmp
	z := float32(x * x)
	y := avxLogP[0]
	for _, p := range avxLogP[1:] {
		y = fma32(y, x, p)
	}
	y = float32(y * x)
	y = fma32(y, z, float32(e*avxLogQ1))
	y = y - float32(z*0.5)
	x = x + y
	x = fma32(e, avxLogQ2, x)
	if invalid {
		return float32(math.NaN())
	}
	return x
}

// avxSinCos is sincos256_ps for one lane.
func avxSinCos(x float32) (sin, cos float32) {
	signSin := math.Float32bits(x) & 0x80000000
	x = math.Float32frombits(math.Float32bits(x) &^ 0x80000000)
	y := float32(x * avxFOPI)
	j := int32(y) // cvttps: truncation
	j = (j + 1) &^ 1
	y = float32(j)
	swapSin := uint32(j&4) << 29
	polyMask := j&2 == 0
	x = fma32(y, avxDP1, x)
	x = fma32(y, avxDP2, x)
	x = fma32(y, avxDP3, x)
	signCos := uint32(^(j-2)&4) << 29
	signSin ^= swapSin

	z := float32(x * x)
	yc := fma32(avxCosP0, z, avxCosP1)
	yc = fma32(yc, z, avxCosP2)
	yc = float32(yc * z)
	yc = fma32(yc, z, -float32(z*0.5))
	yc = yc + 1

	ys := fma32(avxSinP0, z, avxSinP1)
	ys = fma32(ys, z, avxSinP2)
	ys = float32(ys * z)
	ys = fma32(ys, x, x)

	if polyMask {
		sin, cos = ys, yc
	} else {
		sin, cos = yc, ys
	}
	sin = math.Float32frombits(math.Float32bits(sin) ^ signSin)
	cos = math.Float32frombits(math.Float32bits(cos) ^ signCos)
	return sin, cos
}

// normalFill16AVX turns 16 uniforms into 16 normals as torch's
// normal_fill_16_AVX2: Box-Muller on (d[j], d[j+8]) for j < 8.
func normalFill16AVX(d []float32, mean, std float32) {
	twoPi := float32(2 * math.Pi)
	for j := range 8 {
		u1 := 1 - d[j]
		u2 := d[j+8]
		radius := float32(math.Sqrt(float64(float32(-2 * avxLog(u1)))))
		s, c := avxSinCos(float32(twoPi * u2))
		d[j] = fma32(float32(radius*c), std, mean)
		d[j+8] = fma32(float32(radius*s), std, mean)
	}
}
