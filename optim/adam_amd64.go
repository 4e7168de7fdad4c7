package optim

import "unsafe"

// adamConsts are the per-step constants of adamF32SSE, in its order.
type adamConsts struct{ b1, omb1, b2, omb2, invBc2, eps, step float32 }

//go:noescape
func adamF32SSE(p, grad, m, v *float32, n int, c *adamConsts)

// adamF32Vec runs the common Adam update on the leading multiple of 4
// elements with SSE2 and returns how many it did.
func adamF32Vec(p, g, m, v []float32, c adamConsts) int {
	n := len(p) &^ 3
	if n > 0 {
		adamF32SSE(unsafe.SliceData(p), unsafe.SliceData(g), unsafe.SliceData(m), unsafe.SliceData(v), n, &c)
	}
	return n
}
