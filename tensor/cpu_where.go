package tensor

// cpuWhere is the host's Where entry: y = m ≠ 0 ? a : b, a nil a reading
// va and a nil b vb (y may alias an operand).
func cpuWhere(y, m, a, b *Tensor, va, vb float64) {
	if y.dtype == Float64 {
		whereLoop(hostElems[float64](y), hostElems[float64](m), optElems[float64](a), optElems[float64](b), va, vb)
	} else {
		whereLoop(hostElems[float32](y), hostElems[float32](m), optElems[float32](a), optElems[float32](b), float32(va), float32(vb))
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
