//go:build mpi

package mpi_test

import (
	"math"
	"unsafe"

	"goddp/comm"
)

// makeBuf builds a buffer of dtype dt holding vals (converted).
func makeBuf(dt comm.DType, vals []float64) comm.Buffer {
	switch dt {
	case comm.Float32:
		x := make([]float32, len(vals))
		for i, v := range vals {
			x[i] = float32(v)
		}
		return comm.Float32s(x)
	case comm.Float64:
		return comm.Float64s(append([]float64{}, vals...))
	case comm.Int32:
		x := make([]int32, len(vals))
		for i, v := range vals {
			x[i] = int32(v)
		}
		return comm.Int32s(x)
	case comm.Int64:
		x := make([]int64, len(vals))
		for i, v := range vals {
			x[i] = int64(v)
		}
		return comm.Int64s(x)
	case comm.Float16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = f32ToF16(float32(v))
		}
		return comm.Float16s(x)
	case comm.BFloat16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = f32ToBF16(float32(v))
		}
		return comm.BFloat16s(x)
	}
	panic("dtype")
}

func elems[T any](b comm.Buffer) []T {
	var z T
	n := len(b.Bytes) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes[0])), n)
}

// readBuf reads a buffer back as float64s.
func readBuf(b comm.Buffer) []float64 {
	out := make([]float64, b.Len())
	switch b.DType {
	case comm.Float32:
		for i, v := range elems[float32](b) {
			out[i] = float64(v)
		}
	case comm.Float64:
		copy(out, elems[float64](b))
	case comm.Int32:
		for i, v := range elems[int32](b) {
			out[i] = float64(v)
		}
	case comm.Int64:
		for i, v := range elems[int64](b) {
			out[i] = float64(v)
		}
	case comm.Float16:
		for i, v := range elems[uint16](b) {
			out[i] = float64(f16ToF32(v))
		}
	case comm.BFloat16:
		for i, v := range elems[uint16](b) {
			out[i] = float64(bf16ToF32(v))
		}
	}
	return out
}

// Reference half-precision conversions (round to nearest even), written
// independently of the C ones they check.

func f16ToF32(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * float32(m*math.Pow(2, -24))
	case 0x1f:
		if m != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32((1+m/1024)*math.Pow(2, float64(e-15)))
}

func f32ToF16(f float32) uint16 {
	// Search the 65536 halves would be slow; instead round via float64.
	x := float64(f)
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsNaN(x):
		return 0x7e00
	case x >= 65520: // rounds to infinity
		return sign | 0x7c00
	case x < math.Pow(2, -14): // subnormal: multiples of 2^-24
		return sign | uint16(math.RoundToEven(x*math.Pow(2, 24)))
	}
	e := math.Floor(math.Log2(x))
	m := math.RoundToEven((x/math.Pow(2, e) - 1) * 1024)
	if m == 1024 {
		m, e = 0, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u >> 16 & 1)
	return uint16(u >> 16)
}
