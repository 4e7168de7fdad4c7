//go:build !cgo || noblas

package tensor

// This build has no fused attention kernels (flash_fused_kernels.c):
// cpu_flash_attention.go's tiles serve every head.

func flashFusedOK(int) bool                      { return false }
func flashFusedScratch(bool, bool, int, int) int { return 0 }

func flashFusedForward(*flashGeom, []float32, []float32, []float32, float32, []float32, int) {
	panic("tensor: flashFusedForward without cgo")
}

func flashFusedBackward(*flashGeom, []float32, []float32, []float32, []float32, []float32, float32, []float32, int) {
	panic("tensor: flashFusedBackward without cgo")
}
