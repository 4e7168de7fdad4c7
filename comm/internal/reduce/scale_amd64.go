package reduce

import "unsafe"

//go:noescape
func divF32SSE(x *float32, n int, d float32)

//go:noescape
func mulF32SSE(x *float32, n int, s float32)

//go:noescape
func divF64SSE(x *float64, n int, d float64)

//go:noescape
func mulF64SSE(x *float64, n int, s float64)

// divF32Vec divides the leading multiple of 16 elements of x by d and
// returns how many it did. For d a power of two it multiplies by 1/d,
// which rounds to exactly x/d.
func divF32Vec(x []float32, d int) int {
	m := len(x) &^ 15
	if m == 0 {
		return 0
	}
	if d > 0 && d&(d-1) == 0 {
		mulF32SSE(unsafe.SliceData(x), m, 1/float32(d))
	} else {
		divF32SSE(unsafe.SliceData(x), m, float32(d))
	}
	return m
}

// divF64Vec is divF32Vec for float64 (blocks of 8).
func divF64Vec(x []float64, d int) int {
	m := len(x) &^ 7
	if m == 0 {
		return 0
	}
	if d > 0 && d&(d-1) == 0 {
		mulF64SSE(unsafe.SliceData(x), m, 1/float64(d))
	} else {
		divF64SSE(unsafe.SliceData(x), m, float64(d))
	}
	return m
}
