//go:build !cgo || noblas

package tensor

// This build has no C row kernels: every hook reports that it did not run,
// and rownorm.go's Go loops do the work.

func layerNormC[T float](_, _, _, _, _, _, _ []T, _, _ int, _ float64) bool {
	return false
}
func layerNormBwdC[T float](_, _, _, _, _, _, _, _, _ []T, _, _ int) bool {
	return false
}
func softmaxRowsC[T float](_, _ []T, _, _ int, _ bool) bool    { return false }
func softmaxBwdRowsC[T float](_, _ []T, _, _ int, _ bool) bool { return false }
func addRowsC[T float](_, _ []T, _, _ int) bool                { return false }
func softmaxRowC[T float](_, _ []T) (m, sum float64, ok bool)  { return 0, 0, false }

// roundBF16s is RoundBF16Slice's kernel (dst may be src).
func roundBF16s(dst, src []float32) {
	for i, v := range src {
		dst[i] = RoundBF16(v)
	}
}

// roundBF16Causal is RoundBF16Causal's kernel.
func roundBF16Causal(dst, src []float32, l, s int) {
	for i := range l {
		n := min(i+1, s)
		roundBF16s(dst[i*s:i*s+n], src[i*s:i*s+n])
	}
}
