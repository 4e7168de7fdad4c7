package tensor

// deviceGemmFunc is the signature of Kernels.Gemm and Kernels.GemmBF16.
type deviceGemmFunc = func(transA, transB bool, m, n, k int, alpha float32, a *Tensor, lda int,
	b *Tensor, ldb int, beta float32, c *Tensor, ldc int)

// deviceGemm returns the device product of precision p: Gemm, or GemmBF16
// for autocast's bfloat16. A device without GemmBF16 refuses a bfloat16
// product rather than running it in float32: autocast would then give other
// numbers than on the CPU, silently.
func deviceGemm(k *Kernels, p Precision, op string, d Device) deviceGemmFunc {
	if p == PrecisionBFloat16 {
		NeedKernel(k.GemmBF16 != nil, op+" in bfloat16 (autocast)", d)
		return k.GemmBF16
	}
	NeedKernel(k.Gemm != nil, op, d)
	return k.Gemm
}

// convPrecision is the product precision a Conv2dShape asks for.
func convPrecision(s *Conv2dShape) Precision {
	if s.BF16 {
		return PrecisionBFloat16
	}
	return PrecisionFloat32
}
