//go:build !amd64

package simd

// No vector kernel off amd64: the scalar loop does all the work.
func AdamF32(p, g, m, v []float32, c AdamConsts) int { return 0 }
