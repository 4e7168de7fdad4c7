package tensor

import "math"

// The host's op table. The CPU is a device like sim and cuda: an op that
// dispatches through table (below) runs the entry of its operands'
// device, these functions on the host. They are today's host loops (the C
// engine's and the AVX-512 kernels behind binVV, ExpF32, GELUF32, ...),
// moved behind the table unchanged. Unlike a device's entries they take
// float64 operands too (the finite-difference gradient checks run in
// float64); the operands are contiguous, as on every device.
//
// Entries not yet filled are ops whose host code still sits in the op
// itself (the old path, see doc.go's "Adding an op"); an op dispatching
// through table panics with NoKernel on a nil entry, never falling back.
var cpuTable Kernels

// The table is filled in init, not in its declaration, because its
// entries call ops that reach the table again (an initialization cycle for
// the compiler); it is written only here and read-only afterwards.
func init() {
	cpuTable = Kernels{
		Exp:     cpuUnary(opExp),
		Log:     cpuUnary(opLog),
		Sqrt:    cpuUnary(opSqrt),
		Tanh:    cpuUnary(opTanh),
		Sigmoid: cpuUnary(opSigmoid),
		ReLU:    cpuUnary(opReLU),
		GELU:    cpuUnary(opGELU),
		Scale:   cpuScale,
		Mul:     cpuBinary(opMul),
		Div:     cpuBinary(opDiv),

		ReLUBackward:       cpuReLUBackward,
		GELUBackward:       cpuGELUBackward,
		GELUWithGrad:       cpuGELUWithGrad,
		GELUTanh:           cpuGELUTanh,
		GELUTanhBackward:   cpuGELUTanhBackward,
		GELUTanhWithGrad:   cpuGELUTanhWithGrad,
		TanhBackward:       cpuGrad(func(g, y float64) float64 { return g * (1 - y*y) }, func(g, y float32) float32 { return g * (1 - y*y) }),
		SigmoidBackward:    cpuGrad(func(g, y float64) float64 { return g * y * (1 - y) }, func(g, y float32) float32 { return g * y * (1 - y) }),
		Softmax:            cpuSoftmax(false),
		LogSoftmax:         cpuSoftmax(true),
		SoftmaxBackward:    cpuSoftmaxBackward,
		LogSoftmaxBackward: cpuLogSoftmaxBackward,

		FlashAttention:         cpuFlashAttention,
		FlashAttentionBackward: cpuFlashAttentionBackward,

		Where: cpuWhere,

		AdamMulti: cpuAdamMulti,
		SGDMulti:  cpuSGDMulti,

		BatchNormStats:          cpuBatchNormStats,
		BatchNormFinalize:       cpuBatchNormFinalize,
		BatchNormApply:          cpuBatchNormApply,
		BatchNormBackwardReduce: cpuBatchNormBackwardReduce,
		BatchNormBackwardInput:  cpuBatchNormBackwardInput,

		LayerNorm:         cpuLayerNorm,
		LayerNormBackward: cpuLayerNormBackward,
		Attention:         cpuAttention,
		AttentionBackward: cpuAttentionBackward,

		Gemm:               cpuGemm,
		GemmStridedBatched: cpuGemmStridedBatched,

		IndexSelect:           cpuIndexSelect,
		IndexAdd:              cpuIndexAdd,
		Gather:                cpuGather,
		ScatterAdd:            cpuScatterAdd,
		MaxDim:                cpuMaxDim,
		MaxDimBackward:        cpuMaxDimBackward,
		CopyBlock:             cpuCopyBlock,
		StridedCopy:           cpuStridedCopy,
		Clamp:                 cpuClamp,
		ClampBackward:         cpuClampBackward,
		PowScalar:             cpuPowScalar,
		PowScalarBackward:     cpuPowScalarBackward,
		PowBackward:           cpuPowBackward,
		BCEWithLogits:         cpuBCEWithLogits,
		BCEWithLogitsBackward: cpuBCEWithLogitsBackward,

		Conv2dForward:     cpuConv2dForward,
		Conv2dBackward:    cpuConv2dBackward,
		Im2col:            cpuIm2col,
		Col2im:            cpuCol2im,
		Swap01:            cpuSwap01,
		AddChannelBias:    cpuAddChannelBias,
		SumChannels:       cpuSumChannels,
		MaxPool2d:         cpuMaxPool2d,
		MaxPool2dBackward: cpuMaxPool2dBackward,
		AvgPool2d:         cpuAvgPool2d,
		AvgPool2dBackward: cpuAvgPool2dBackward,
		DropoutFromRNG:    cpuDropoutFromRNG,

		SqrtBackward: cpuGrad(func(g, y float64) float64 { return g / (2 * y) }, func(g, y float32) float32 { return g / (2 * y) }),
	}
}

// f32s and f64s return t's contiguous elements (plain functions: a
// generic one converting through an interface cost an allocation a call).
func f32s(t *Tensor) []float32 { return t.F32()[:t.Numel()] }
func f64s(t *Tensor) []float64 { return t.F64()[:t.Numel()] }

// optHostF32 and optHostF64 are f32s and f64s of an operand that may be nil.
func optHostF32(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return f32s(t)
}

func optHostF64(t *Tensor) []float64 {
	if t == nil {
		return nil
	}
	return f64s(t)
}

// cpuUnary is y = op(x): the float32 vector kernel where there is one
// (relu.go, fastmath.go), else unaryLoop.
func cpuUnary(op unOp) func(y, x *Tensor) {
	return func(y, x *Tensor) {
		if y.dtype == Float64 {
			unaryLoop(op, f64s(y), f64s(x), 0, 0)
			return
		}
		if k := float32Kernel(op); k != nil {
			k(f32s(y), f32s(x))
			return
		}
		unaryLoop(op, f32s(y), f32s(x), 0, 0)
	}
}

func cpuScale(y, x *Tensor, s float32) {
	if y.dtype == Float64 {
		binVS(opMul, f64s(y), f64s(x), float64(s))
		return
	}
	binVS(opMul, f32s(y), f32s(x), s)
}

func cpuBinary(op binOp) func(y, a, b *Tensor) {
	return func(y, a, b *Tensor) {
		if y.dtype == Float64 {
			binVV(op, f64s(y), f64s(a), f64s(b))
			return
		}
		binVV(op, f32s(y), f32s(a), f32s(b))
	}
}

// cpuGrad is dx = f(dy, s) elementwise, s being what the op saved.
func cpuGrad(f64 func(g, s float64) float64, f32 func(g, s float32) float32) func(dx, dy, s *Tensor) {
	return func(dx, dy, s *Tensor) {
		if dx.dtype == Float64 {
			gradLoop(f64s(dx), f64s(dy), f64s(s), f64)
			return
		}
		gradLoop(f32s(dx), f32s(dy), f32s(s), f32)
	}
}

func gradLoop[T float](dx, dy, s []T, f func(g, s T) T) {
	dy, s = dy[:len(dx)], s[:len(dx)]
	for i, g := range dy {
		dx[i] = f(g, s[i])
	}
}

func cpuReLUBackward(dx, dy, y *Tensor) {
	if dy.dtype == Float64 {
		reluBwd64(f64s(dx), f64s(dy), f64s(y))
		return
	}
	ReLUBackwardF32(f32s(dx), f32s(dy), f32s(y))
}

func cpuGELUBackward(dx, dy, x *Tensor) {
	if dy.dtype == Float64 {
		geluBwd64(f64s(dx), f64s(dy), f64s(x))
		return
	}
	GELUGradF32(f32s(dx), f32s(dy), f32s(x))
}

// cpuGELUWithGrad is float32 only (UnaryForward calls it for float32
// operands): float64, which serves the gradient checks, recomputes the
// derivative in the backward (GELUBackward).
func cpuGELUWithGrad(y, d, x *Tensor) {
	GELUWithGradF32(f32s(y), f32s(d), f32s(x))
}

func geluBwd64(gx, gy, x []float64) {
	const invSqrt2Pi = 0.39894228040143267794
	gy, x = gy[:len(gx)], x[:len(gx)]
	for i, g := range gy {
		v := x[i]
		cdf := 0.5 * (1 + math.Erf(v*invSqrt2))
		pdf := invSqrt2Pi * math.Exp(-0.5*v*v)
		gx[i] = g * (cdf + v*pdf)
	}
}
