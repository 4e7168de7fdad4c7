package reduce

import (
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/half"
	"unsafe"
)

// Elementwise reduction kernels shared by every backend. Into folds src
// into dst in place; Avg reduces as Sum and the caller divides once at the
// end with Scale/Divide, as NCCL and Gloo do, so that partial sums
// are never rounded twice.
//
// The loops are written per dtype and per op (no switch inside a loop) and
// unrolled by 8 so that the compiler drops the bounds checks; float16 and
// bfloat16 are widened to float32 for the arithmetic and rounded back to
// nearest-even.

// Into sets dst[i] = op(dst[i], src[i]) for every element. dst and src
// must have the same dtype and length (a programmer error otherwise).
func Into(dst, src backend.Buffer, op backend.ReduceOp) {
	if dst.DType != src.DType || len(dst.Bytes) != len(src.Bytes) {
		panic(fmt.Sprintf("comm: Into: mismatched buffers %v[%d] and %v[%d]",
			dst.DType, dst.Len(), src.DType, src.Len()))
	}
	if len(dst.Bytes) == 0 {
		return
	}
	// float32/float64 sums (what data-parallel training reduces) take the
	// AVX kernel where the CPU has one; it rounds element by element as the
	// scalar loop does, so results stay bit-identical. Below 128 bytes (one
	// vector block, and AddFast's scalar tail) the scalar loop is as fast.
	if reduceAVX && (op == backend.Sum || op == backend.Avg) && len(dst.Bytes) >= 128 && AddFast(dst, src) {
		return
	}
	switch dst.DType {
	case backend.Float32:
		reduceNum(view[float32](dst), view[float32](src), op)
	case backend.Float64:
		reduceNum(view[float64](dst), view[float64](src), op)
	case backend.Int32:
		reduceNum(view[int32](dst), view[int32](src), op)
	case backend.Int64:
		reduceNum(view[int64](dst), view[int64](src), op)
	case backend.Float16:
		reduceHalf(view[uint16](dst), view[uint16](src), op, false)
	case backend.BFloat16:
		reduceHalf(view[uint16](dst), view[uint16](src), op, true)
	default:
		panic(fmt.Sprintf("comm: Into: unknown dtype %v", dst.DType))
	}
}

// reduceAVX caches HasAVX (CPUID traps to the hypervisor on a VM).
var reduceAVX = HasAVX()

// Scale multiplies every element by s (integers are truncated toward zero).
func Scale(buf backend.Buffer, s float64) {
	switch buf.DType {
	case backend.Float32:
		x, f := view[float32](buf), float32(s)
		for i := range x {
			x[i] *= f
		}
	case backend.Float64:
		x := view[float64](buf)
		for i := range x {
			x[i] *= s
		}
	case backend.Int32:
		x := view[int32](buf)
		for i := range x {
			x[i] = int32(float64(x[i]) * s)
		}
	case backend.Int64:
		x := view[int64](buf)
		for i := range x {
			x[i] = int64(float64(x[i]) * s)
		}
	case backend.Float16, backend.BFloat16:
		f := float32(s)
		mapHalf(view[uint16](buf), buf.DType == backend.BFloat16, func(x []float32) {
			for i := range x {
				x[i] *= f
			}
		})
	}
}

// Divide divides every element by n: exact integer division (toward zero)
// for integer dtypes, true division for floats. It finishes an Avg.
func Divide(buf backend.Buffer, n int) {
	switch buf.DType {
	case backend.Float32:
		x, d := view[float32](buf), float32(n)
		for i := divF32Vec(x, n); i < len(x); i++ {
			x[i] /= d
		}
	case backend.Float64:
		x, d := view[float64](buf), float64(n)
		for i := divF64Vec(x, n); i < len(x); i++ {
			x[i] /= d
		}
	case backend.Int32:
		x, d := view[int32](buf), int32(n)
		for i := range x {
			x[i] /= d
		}
	case backend.Int64:
		x, d := view[int64](buf), int64(n)
		for i := range x {
			x[i] /= d
		}
	case backend.Float16, backend.BFloat16:
		d := float32(n)
		mapHalf(view[uint16](buf), buf.DType == backend.BFloat16, func(x []float32) {
			for i := range x {
				x[i] /= d
			}
		})
	}
}

// view reinterprets a buffer's bytes as a slice of T (length rounded down).
func view[T any](b backend.Buffer) []T {
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
func reduceNum[T number](d, s []T, op backend.ReduceOp) {
	s = s[:len(d)]
	switch op {
	case backend.Sum, backend.Avg:
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
	case backend.Product:
		for i := range d {
			d[i] *= s[i]
		}
	case backend.Max:
		for i, v := range s {
			if v > d[i] || v != v {
				d[i] = v
			}
		}
	case backend.Min:
		for i, v := range s {
			if v < d[i] || v != v {
				d[i] = v
			}
		}
	default:
		panic(fmt.Sprintf("comm: Into: unknown op %v", op))
	}
}

// Half-precision buffers are reduced in blocks: widen a block of each side
// to float32 on the stack, reduce with the float32 loop, narrow back. The
// widen/narrow loops are spelled out per format so the conversions inline.
const halfBlock = 512

func reduceHalf(d, s []uint16, op backend.ReduceOp, bf bool) {
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
			dst[i] = half.BF16ToF32(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = half.F16ToF32(v)
	}
}

func narrowHalf(dst []uint16, src []float32, bf bool) {
	src = src[:len(dst)]
	if bf {
		for i, v := range src {
			dst[i] = half.F32ToBF16(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = half.F32ToF16(v)
	}
}
