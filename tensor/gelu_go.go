//go:build !cgo || noblas

package tensor

// Without cgo GELU runs fastmath.go's Go loops at every length.
const geluCMin = 1 << 62

func geluC(dst, src []float32) bool { return false }

func geluGradC(dst, gy, x []float32) bool { return false }

func geluWithGradC(dst, grad, src []float32) bool { return false }

func mulAddRowsC(y, x, s, d []float32, rows, cols int) bool { return false }
