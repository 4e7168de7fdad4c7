// Package half converts between float32 and the two 16-bit floating-point
// formats goddp moves over the wire: IEEE 754 binary16 (float16) and
// bfloat16. Narrowing rounds to nearest, ties to even, as torch's
// .to(float16) / .to(bfloat16) do; overflow gives ±Inf; NaN stays a quiet
// NaN and keeps the top bits of its payload, as x86's F16C and CUDA's
// conversions do. comm's reductions and ddp's compression hooks both use
// it, so a value compressed by a hook and one reduced by a backend round
// the same way.
package half

import "math"

// F16ToF32 widens an IEEE binary16 value exactly.
func F16ToF32(h uint16) float32 {
	o := uint32(h&0x7fff) << 13
	exp := o & (0x1f << 23)
	o += (127 - 15) << 23 // rebias
	if exp == 0x1f<<23 {
		o += (128 - 16) << 23 // inf/NaN: exponent all ones, payload kept
	} else if exp == 0 {
		o = f16Subnormal(o)
	}
	return math.Float32frombits(o | uint32(h&0x8000)<<16)
}

// f16Subnormal renormalises a rebiased zero or subnormal half.
func f16Subnormal(o uint32) uint32 {
	o += 1 << 23
	return math.Float32bits(math.Float32frombits(o) - math.Float32frombits(113<<23))
}

// F32ToF16 narrows to binary16 rounding to nearest-even; overflow gives inf
// and NaN stays a (quiet) NaN.
func F32ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	a := x & 0x7fffffff
	if a-(113<<23) < (143-113)<<23 {
		// Normal result: rebias and round the 13 dropped bits to
		// nearest-even; a mantissa carry bumps the exponent (up to inf).
		return uint16(x>>16)&0x8000 | uint16((a-(112<<23)+0xfff+(a>>13)&1)>>13)
	}
	return f32ToF16Rare(x)
}

// f32ToF16Rare handles zero, subnormal, overflow, inf and NaN results.
func f32ToF16Rare(x uint32) uint16 {
	sign := uint16(x>>16) & 0x8000
	x &= 0x7fffffff
	switch {
	case x > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16((x>>13)&0x3ff)
	case x >= (127+16)<<23: // >= 65536 or inf
		return sign | 0x7c00
	}
	// Below the smallest normal half. Adding 0.5 aligns the half subnormal's
	// integer mantissa with float32's low bits; the float add itself rounds
	// to nearest-even.
	r := math.Float32frombits(x) + 0.5
	return sign | uint16(math.Float32bits(r)-math.Float32bits(0.5))
}

// BF16ToF32 widens a bfloat16 value exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows to bfloat16 rounding to nearest-even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x40
	}
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}
