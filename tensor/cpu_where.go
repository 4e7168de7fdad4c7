package tensor

// cpuWhere is the host's Where entry: y = m ≠ 0 ? a : b, a nil a reading
// va and a nil b vb (y may alias an operand).
func cpuWhere(y, m, a, b *Tensor, va, vb float64) {
	if y.dtype == Float64 {
		whereLoop(f64s(y), f64s(m), optHostF64(a), optHostF64(b), va, vb)
	} else {
		whereLoop(f32s(y), f32s(m), optHostF32(a), optHostF32(b), float32(va), float32(vb))
	}
}

func whereLoop[T float](y, m, a, b []T, va, vb T) {
	for i, v := range m[:len(y)] {
		switch {
		case v != 0 && a != nil:
			y[i] = a[i]
		case v != 0:
			y[i] = va
		case b != nil:
			y[i] = b[i]
		default:
			y[i] = vb
		}
	}
}
