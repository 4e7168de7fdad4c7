package simd

import "unsafe"

//go:noescape
func reluF32SSE(dst, src *float32, n int)

//go:noescape
func reluBwdF32SSE(gx, gy, y *float32, n int)

// ReLUF32 handles the leading multiple of 16 elements with SSE2 and
// returns how many it did.
func ReLUF32(dst, src []float32) int {
	m := len(dst) &^ 15
	if m > 0 {
		reluF32SSE(unsafe.SliceData(dst), unsafe.SliceData(src), m)
	}
	return m
}

// ReLUBwdF32 is ReLU's gradient (gx = gy where y > 0, else 0) over the
// leading multiple of 16 elements; it returns how many it did.
func ReLUBwdF32(gx, gy, y []float32) int {
	m := len(gx) &^ 15
	if m > 0 {
		reluBwdF32SSE(unsafe.SliceData(gx), unsafe.SliceData(gy), unsafe.SliceData(y), m)
	}
	return m
}
