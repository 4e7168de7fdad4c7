//go:build !cgo || noblas

package tensor

// This build has no C row kernels for the fused attention: every hook
// reports that it did not run, and cpu_flash_attention.go's Go loops do
// the work.

func flashFwdTileC[T float](_ []T, _, _, _, _, _ int, _, _ bool, _, _, _ []T, _, _ int, _ bool) bool {
	return false
}
func flashFwdFinishC[T float](_ []T, _, _, _ int, _, _, _ []T) bool { return false }
func flashBwdTileC[T float](_, _ []T, _, _, _, _, _ int, _, _ bool, _, _ []T) bool {
	return false
}
func flashRowDotC[T float](_, _ []T, _ int, _ []T, _, _, _ int) bool { return false }

// flashRoundRows rounds the rows×cols matrix x (stride ldx) to bfloat16
// into the contiguous y.
func flashRoundRows(y, x []float32, rows, cols, ldx int) {
	for r := range rows {
		roundBF16s(y[r*cols:(r+1)*cols], x[r*ldx:r*ldx+cols])
	}
}
