package ddp

import "math"

// Conversions between float32 and the two 16-bit formats used by the
// compression comm hooks. Both round to nearest, ties to even, as torch's
// .to(float16) / .to(bfloat16) do.

// f32ToF16 converts to IEEE 754 binary16. Values beyond the half range become
// ±Inf; NaN stays NaN.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half: m = (1.M) * 2^(exp-127) / 2^-24.
		shift := uint(14 - e)
		if shift > 24 {
			return sign
		}
		full := mant | 0x800000
		m := full >> shift
		rem := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	}
	h := sign | uint16(e)<<10 | uint16(mant>>13)
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the correct rounding (up to Inf)
	}
	return h
}

// f16ToF32 widens an IEEE binary16 value exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			return -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// f32ToBF16 keeps the top 16 bits of a float32, rounding to nearest even.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and a NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// bf16ToF32 widens a bfloat16 value exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
