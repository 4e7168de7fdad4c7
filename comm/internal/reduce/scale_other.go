//go:build !amd64

package reduce

// No vector kernels off amd64: Divide's loops do all the work.
func divF32Vec(x []float32, d int) int { return 0 }

func divF64Vec(x []float64, d int) int { return 0 }
