package comm

import (
	"fmt"
	"goddp/internal/half"
	"math"
	"strings"
	"sync"

	"unsafe"
)

// makeBuf builds a buffer of dtype dt holding vals (converted).
func makeBuf(dt DType, vals []float64) Buffer {
	switch dt {
	case Float32:
		x := make([]float32, len(vals))
		for i, v := range vals {
			x[i] = float32(v)
		}
		return Float32s(x)
	case Float64:
		return Float64s(append([]float64{}, vals...))
	case Int32:
		x := make([]int32, len(vals))
		for i, v := range vals {
			x[i] = int32(v)
		}
		return Int32s(x)
	case Int64:
		x := make([]int64, len(vals))
		for i, v := range vals {
			x[i] = int64(v)
		}
		return Int64s(x)
	case Float16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = half.F32ToF16(float32(v))
		}
		return Float16s(x)
	case BFloat16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = half.F32ToBF16(float32(v))
		}
		return BFloat16s(x)
	}
	panic("dtype")
}

// bufToF64 reads a buffer back as float64s.
func bufToF64(b Buffer) []float64 {
	out := make([]float64, b.Len())
	switch b.DType {
	case Float32:
		for i, v := range view[float32](b) {
			out[i] = float64(v)
		}
	case Float64:
		copy(out, view[float64](b))
	case Int32:
		for i, v := range view[int32](b) {
			out[i] = float64(v)
		}
	case Int64:
		for i, v := range view[int64](b) {
			out[i] = float64(v)
		}
	case Float16:
		for i, v := range view[uint16](b) {
			out[i] = float64(half.F16ToF32(v))
		}
	case BFloat16:
		for i, v := range view[uint16](b) {
			out[i] = float64(half.BF16ToF32(v))
		}
	}
	return out
}

func view[T any](b Buffer) []T {
	var z T
	if len(b.Bytes) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes[0])), len(b.Bytes)/int(unsafe.Sizeof(z)))
}

// logSink collects log lines for assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
func refOp(op ReduceOp, a, b float64) float64 {
	switch op {
	case Sum, Avg:
		return a + b
	case Product:
		return a * b
	case Max:
		return math.Max(a, b)
	case Min:
		return math.Min(a, b)
	}
	panic("op")
}
