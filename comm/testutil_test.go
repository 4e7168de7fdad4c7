package comm

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
			x[i] = f32ToF16(float32(v))
		}
		return Float16s(x)
	case BFloat16:
		x := make([]uint16, len(vals))
		for i, v := range vals {
			x[i] = f32ToBF16(float32(v))
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
			out[i] = float64(f16ToF32(v))
		}
	case BFloat16:
		for i, v := range view[uint16](b) {
			out[i] = float64(bf16ToF32(v))
		}
	}
	return out
}
