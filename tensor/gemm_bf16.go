package tensor

import (
	"github.com/goddp/goddp/internal/half"
)

// Precision is the arithmetic a matrix product runs in. Float32 is the
// default; BFloat16 is what torch's autocast(dtype=torch.bfloat16) gives
// linear, matmul and conv: the operands rounded to bfloat16 (8 significant
// bits), the products accumulated in float32, the result float32. The
// tensors stay float32 throughout: parameters, gradients and optimizer
// state are the float32 "master" copies, and only the product's inputs are
// rounded on the way into the kernel.
type Precision uint8

const (
	PrecisionFloat32 Precision = iota
	PrecisionBFloat16
)

func (p Precision) String() string {
	switch p {
	case PrecisionFloat32:
		return "float32"
	case PrecisionBFloat16:
		return "bfloat16"
	}
	return "Precision(?)"
}

// BF16Native reports whether bfloat16 products run natively on this CPU
// (AVX512-BF16, through oneDNN): then GemmBF16 runs at up to twice
// float32's rate. Without it GemmBF16 still computes the same values, at
// float32 speed or below.
func BF16Native() bool { return bf16Native() }

// GemmBF16 is Gemm with op(A) and op(B) rounded to bfloat16 (round to
// nearest even) and the products accumulated in float32.
func GemmBF16(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmBF16Mixed(transA, transB, m, n, k, alpha, BF16Operand{F: a}, lda, BF16Operand{F: b}, ldb, beta, c, ldc)
}

// RoundBF16 rounds x to the nearest bfloat16 value (ties to even), as a
// float32; NaN stays NaN. It is internal/half's conversion there and back.
func RoundBF16(x float32) float32 { return half.BF16ToF32(half.F32ToBF16(x)) }

// RoundBF16Slice writes src's elements rounded to bfloat16 (RoundBF16) to
// dst, which may be src. A float32 GEMM over rounded operands forms the
// products a bfloat16 GEMM does (the product of two bfloat16 values is
// exact in float32), at float32 speed: for products too small to gain from
// bf16 kernels, an operand rounded once serves several of them.
func RoundBF16Slice(dst, src []float32) {
	checkLen("RoundBF16Slice", dst, src)
	roundBF16s(dst[:len(src)], src)
}

// RoundBF16Causal is RoundBF16Slice over the l×s row-major matrix src into
// dst (which may be src), each row i only in its first min(i+1, s)
// entries: causal attention's probabilities and their gradient, which are
// zero past them. The rest of dst is not written.
func RoundBF16Causal(dst, src []float32, l, s int) {
	checkRows("RoundBF16Causal", l, s, len(dst), len(src))
	roundBF16Causal(dst, src, l, s)
}

// roundedBF16 returns a copy of the span of x with every element rounded
// to bfloat16: the fallback engines feed it to the float32 GEMM, which then
// forms the same products (a product of two bf16 values is exact in
// float32).
func roundedBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = RoundBF16(v)
	}
	return y
}
