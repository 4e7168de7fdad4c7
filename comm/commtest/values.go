package commtest

import (
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/half"
	"math"

	"unsafe"
)

// MakeBuffer builds a new buffer of dtype dt holding vals (converted,
// half formats rounded to nearest-even).
func MakeBuffer(dt backend.DType, vals []float64) backend.Buffer {
	switch dt {
	case backend.Float32:
		x := make([]float32, len(vals))
		for i, v := range vals {
			x[i] = float32(v)
		}
		return backend.Float32s(x)
	case backend.Float64:
		return backend.Float64s(append([]float64{}, vals...))
	case backend.Int32:
		x := make([]int32, len(vals))
		for i, v := range vals {
			x[i] = int32(v)
		}
		return backend.Int32s(x)
	case backend.Int64:
		x := make([]int64, len(vals))
		for i, v := range vals {
			x[i] = int64(v)
		}
		return backend.Int64s(x)
	case backend.Float16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = half.F32ToF16(float32(v))
		}
		return backend.Float16s(x)
	case backend.BFloat16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = half.F32ToBF16(float32(v))
		}
		return backend.BFloat16s(x)
	}
	panic("dtype")
}

// Values reads a buffer back as float64s.
func Values(b backend.Buffer) []float64 {
	out := make([]float64, b.Len())
	switch b.DType {
	case backend.Float32:
		for i, v := range view[float32](b) {
			out[i] = float64(v)
		}
	case backend.Float64:
		copy(out, view[float64](b))
	case backend.Int32:
		for i, v := range view[int32](b) {
			out[i] = float64(v)
		}
	case backend.Int64:
		for i, v := range view[int64](b) {
			out[i] = float64(v)
		}
	case backend.Float16:
		for i, v := range view[uint16](b) {
			out[i] = float64(half.F16ToF32(v))
		}
	case backend.BFloat16:
		for i, v := range view[uint16](b) {
			out[i] = float64(half.BF16ToF32(v))
		}
	}
	return out
}

func view[T any](b backend.Buffer) []T {
	var z T
	if len(b.Bytes) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes[0])), len(b.Bytes)/int(unsafe.Sizeof(z)))
}

// refOp is op on two values, as a backend must apply it.
func refOp(op backend.ReduceOp, a, b float64) float64 {
	switch op {
	case backend.Sum, backend.Avg:
		return a + b
	case backend.Product:
		return a * b
	case backend.Max:
		return math.Max(a, b)
	case backend.Min:
		return math.Min(a, b)
	}
	panic("op")
}
