package comm

import (
	"fmt"
	"math"
	"unsafe"
)

// Elementwise reduction kernels shared by every backend. reduceInto folds src
// into dst in place; Avg reduces as Sum and the caller divides once at the
// end with scaleInto/divideInto, as NCCL and Gloo do, so that partial sums
// are never rounded twice.
//
// The loops are written per dtype and per op (no switch inside a loop) and
// unrolled by 8 so that the compiler drops the bounds checks; float16 and
// bfloat16 are widened to float32 for the arithmetic and rounded back to
// nearest-even.

// reduceInto sets dst[i] = op(dst[i], src[i]) for every element. dst and src
// must have the same dtype and length (a programmer error otherwise).
func reduceInto(dst, src Buffer, op ReduceOp) {
	if dst.DType != src.DType || len(dst.Bytes) != len(src.Bytes) {
		panic(fmt.Sprintf("comm: reduceInto: mismatched buffers %v[%d] and %v[%d]",
			dst.DType, dst.Len(), src.DType, src.Len()))
	}
	if len(dst.Bytes) == 0 {
		return
	}
	// float32/float64 sums (what data-parallel training reduces) take the
	// AVX kernel where the CPU has one; it rounds element by element as the
	// scalar loop does, so results stay bit-identical. Below 128 bytes (one
	// vector block, and shmAddFast's scalar tail) the scalar loop is as fast.
	if reduceAVX && (op == Sum || op == Avg) && len(dst.Bytes) >= 128 && shmAddFast(dst, src) {
		return
	}
	switch dst.DType {
	case Float32:
		reduceNum(view[float32](dst), view[float32](src), op)
	case Float64:
		reduceNum(view[float64](dst), view[float64](src), op)
	case Int32:
		reduceNum(view[int32](dst), view[int32](src), op)
	case Int64:
		reduceNum(view[int64](dst), view[int64](src), op)
	case Float16:
		reduceHalf(view[uint16](dst), view[uint16](src), op, false)
	case BFloat16:
		reduceHalf(view[uint16](dst), view[uint16](src), op, true)
	default:
		panic(fmt.Sprintf("comm: reduceInto: unknown dtype %v", dst.DType))
	}
}

// reduceAVX caches shmHasAVX (CPUID traps to the hypervisor on a VM).
var reduceAVX = shmHasAVX()

// scaleInto multiplies every element by s (integers are truncated toward zero).
func scaleInto(buf Buffer, s float64) {
	switch buf.DType {
	case Float32:
		x, f := view[float32](buf), float32(s)
		for i := range x {
			x[i] *= f
		}
	case Float64:
		x := view[float64](buf)
		for i := range x {
			x[i] *= s
		}
	case Int32:
		x := view[int32](buf)
		for i := range x {
			x[i] = int32(float64(x[i]) * s)
		}
	case Int64:
		x := view[int64](buf)
		for i := range x {
			x[i] = int64(float64(x[i]) * s)
		}
	case Float16, BFloat16:
		f := float32(s)
		mapHalf(view[uint16](buf), buf.DType == BFloat16, func(x []float32) {
			for i := range x {
				x[i] *= f
			}
		})
	}
}

// divideInto divides every element by n: exact integer division (toward zero)
// for integer dtypes, true division for floats. It finishes an Avg.
func divideInto(buf Buffer, n int) {
	switch buf.DType {
	case Float32:
		x, d := view[float32](buf), float32(n)
		for i := divF32Vec(x, n); i < len(x); i++ {
			x[i] /= d
		}
	case Float64:
		x, d := view[float64](buf), float64(n)
		for i := divF64Vec(x, n); i < len(x); i++ {
			x[i] /= d
		}
	case Int32:
		x, d := view[int32](buf), int32(n)
		for i := range x {
			x[i] /= d
		}
	case Int64:
		x, d := view[int64](buf), int64(n)
		for i := range x {
			x[i] /= d
		}
	case Float16, BFloat16:
		d := float32(n)
		mapHalf(view[uint16](buf), buf.DType == BFloat16, func(x []float32) {
			for i := range x {
				x[i] /= d
			}
		})
	}
}

// view reinterprets a buffer's bytes as a slice of T (length rounded down).
func view[T any](b Buffer) []T {
	var z T
	n := len(b.Bytes) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes[0])), n)
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64
}

// reduceNum is the loop for every native dtype. v != v holds only for a
// float NaN, so Max and Min propagate NaN as torch.maximum does and cost
// integers nothing.
func reduceNum[T number](d, s []T, op ReduceOp) {
	s = s[:len(d)]
	switch op {
	case Sum, Avg:
		i := 0
		for ; i+8 <= len(d); i += 8 {
			dd, ss := d[i:i+8:i+8], s[i:i+8:i+8]
			dd[0] += ss[0]
			dd[1] += ss[1]
			dd[2] += ss[2]
			dd[3] += ss[3]
			dd[4] += ss[4]
			dd[5] += ss[5]
			dd[6] += ss[6]
			dd[7] += ss[7]
		}
		for ; i < len(d); i++ {
			d[i] += s[i]
		}
	case Product:
		for i := range d {
			d[i] *= s[i]
		}
	case Max:
		for i, v := range s {
			if v > d[i] || v != v {
				d[i] = v
			}
		}
	case Min:
		for i, v := range s {
			if v < d[i] || v != v {
				d[i] = v
			}
		}
	default:
		panic(fmt.Sprintf("comm: reduceInto: unknown op %v", op))
	}
}

// Half-precision buffers are reduced in blocks: widen a block of each side
// to float32 on the stack, reduce with the float32 loop, narrow back. The
// widen/narrow loops are spelled out per format so the conversions inline.
const halfBlock = 512

func reduceHalf(d, s []uint16, op ReduceOp, bf bool) {
	var a, b [halfBlock]float32
	for off := 0; off < len(d); off += halfBlock {
		n := min(halfBlock, len(d)-off)
		dd, ss := d[off:off+n], s[off:off+n]
		widenHalf(a[:n], dd, bf)
		widenHalf(b[:n], ss, bf)
		reduceNum(a[:n], b[:n], op)
		narrowHalf(dd, a[:n], bf)
	}
}

// mapHalf applies f to every element through float32.
func mapHalf(x []uint16, bf bool, f func([]float32)) {
	var a [halfBlock]float32
	for off := 0; off < len(x); off += halfBlock {
		n := min(halfBlock, len(x)-off)
		xx := x[off : off+n]
		widenHalf(a[:n], xx, bf)
		f(a[:n])
		narrowHalf(xx, a[:n], bf)
	}
}

func widenHalf(dst []float32, src []uint16, bf bool) {
	dst = dst[:len(src)]
	if bf {
		for i, v := range src {
			dst[i] = bf16ToF32(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = f16ToF32(v)
	}
}

func narrowHalf(dst []uint16, src []float32, bf bool) {
	src = src[:len(dst)]
	if bf {
		for i, v := range src {
			dst[i] = f32ToBF16(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = f32ToF16(v)
	}
}

// f16ToF32 widens an IEEE binary16 value exactly.
func f16ToF32(h uint16) float32 {
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

// f32ToF16 narrows to binary16 rounding to nearest-even; overflow gives inf
// and NaN stays a (quiet) NaN.
func f32ToF16(f float32) uint16 {
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

// bf16ToF32 widens a bfloat16 value exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 narrows to bfloat16 rounding to nearest-even; NaN stays NaN.
func f32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x40
	}
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}
