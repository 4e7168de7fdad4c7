package simd

import "unsafe"

//go:noescape
func adamF32SSE(p, grad, m, v *float32, n int, c *AdamConsts)

// AdamF32 runs the common Adam update on the leading multiple of 4 elements
// with SSE2 and returns how many it did; the caller's scalar loop, whose
// order of operations the kernel keeps bit for bit, does the rest.
func AdamF32(p, g, m, v []float32, c AdamConsts) int {
	n := len(p) &^ 3
	if n > 0 {
		adamF32SSE(unsafe.SliceData(p), unsafe.SliceData(g), unsafe.SliceData(m), unsafe.SliceData(v), n, &c)
	}
	return n
}
