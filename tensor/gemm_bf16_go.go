//go:build !cgo || noblas

package tensor

import "github.com/goddp/goddp/internal/half"

func bf16Native() bool { return false }

func bf16Impl(transA, transB bool, m, n, k, lda, ldb, ldc int) string { return "" }

func engineToBF16(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = half.F32ToBF16(v)
	}
}

func engineToBF16AddRows(dst []uint16, src, d []float32, rows, cols int) {
	engineToBF16(dst, src[:rows*cols])
	AddRows(d, src, rows, cols)
}

func engineGELUWithGradToBF16(y []uint16, grad, x []float32) {
	v := make([]float32, len(x))
	GELUWithGradF32(v, grad, x)
	engineToBF16(y, v)
}

func engineToBF16MulAddRows(dst []uint16, src, s, d []float32, rows, cols int) {
	g := make([]float32, rows*cols)
	mulAddRows(g, src[:rows*cols], s[:rows*cols], d, rows, cols)
	engineToBF16(dst, g)
}

// widened returns the operand as float32 values rounded to bfloat16.
func (o BF16Operand) widened() []float32 {
	if o.H == nil {
		return roundedBF16(o.F)
	}
	f := make([]float32, len(o.H))
	for i, h := range o.H {
		f[i] = half.BF16ToF32(h)
	}
	return f
}

func engineGemmBF16Mixed(transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, beta float32, c []float32, ldc int) {
	engineSgemm(transA, transB, m, n, k, alpha, a.widened(), lda, b.widened(), ldb, beta, c, ldc)
}

func engineLinearBF16Mixed(y []float32, x, w BF16Operand, b []float32, n, in, out int) {
	copyRows(y[:n*out], b[:out])
	engineGemmBF16Mixed(false, true, n, out, in, 1, x, in, w, in, 1, y, out)
}
