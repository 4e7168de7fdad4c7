//go:build !cgo || noblas

package tensor

import "github.com/goddp/goddp/tensor/internal/simd"

// adamFusedF32 reports false: without cgo adamUpdate runs the decay's
// axpy and the SSE2 kernel (the same bits as adam_kernels.c).
func adamFusedF32(p, g, m, v []float32, decay bool, a float32, c simd.AdamConsts) bool {
	return false
}

func adamFusedF32Level(p, g, m, v []float32, decay bool, a float32, c simd.AdamConsts, level int) bool {
	return false
}
