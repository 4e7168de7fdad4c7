//go:build !amd64

package simd

// No vector kernels off amd64: the callers' scalar loops do all the work.
func ReLUF32(dst, src []float32) int { return 0 }

func ReLUBwdF32(gx, gy, y []float32) int { return 0 }
