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
		TanhBackward:       cpuGrad(func(g, y float64) float64 { return g * (1 - y*y) }, func(g, y float32) float32 { return g * (1 - y*y) }),
		SigmoidBackward:    cpuGrad(func(g, y float64) float64 { return g * y * (1 - y) }, func(g, y float32) float32 { return g * y * (1 - y) }),
		Softmax:            cpuSoftmax(false),
		LogSoftmax:         cpuSoftmax(true),
		SoftmaxBackward:    cpuSoftmaxBackward,
		LogSoftmaxBackward: cpuLogSoftmaxBackward,

		Where: cpuWhere,

		BatchNormStats:          cpuBatchNormStats,
		BatchNormFinalize:       cpuBatchNormFinalize,
		BatchNormApply:          cpuBatchNormApply,
		BatchNormBackwardReduce: cpuBatchNormBackwardReduce,
		BatchNormBackwardInput:  cpuBatchNormBackwardInput,

		SqrtBackward: cpuGrad(func(g, y float64) float64 { return g / (2 * y) }, func(g, y float32) float32 { return g / (2 * y) }),
	}
}

// hostElems returns t's n contiguous elements of type T.
func hostElems[T float](t *Tensor) []T {
	var z T
	if _, ok := any(z).(float32); ok {
		return any(t.F32()[:t.Numel()]).([]T)
	}
	return any(t.F64()[:t.Numel()]).([]T)
}

// cpuUnary is y = op(x): the float32 vector kernel where there is one
// (relu.go, fastmath.go), else unaryLoop.
func cpuUnary(op unOp) func(y, x *Tensor) {
	return func(y, x *Tensor) {
		if y.dtype == Float64 {
			unaryLoop(op, hostElems[float64](y), hostElems[float64](x), 0, 0)
			return
		}
		if k := float32Kernel(op); k != nil {
			k(hostElems[float32](y), hostElems[float32](x))
			return
		}
		unaryLoop(op, hostElems[float32](y), hostElems[float32](x), 0, 0)
	}
}

func cpuScale(y, x *Tensor, s float32) {
	if y.dtype == Float64 {
		binVS(opMul, hostElems[float64](y), hostElems[float64](x), float64(s))
		return
	}
	binVS(opMul, hostElems[float32](y), hostElems[float32](x), s)
}

func cpuBinary(op binOp) func(y, a, b *Tensor) {
	return func(y, a, b *Tensor) {
		if y.dtype == Float64 {
			binVV(op, hostElems[float64](y), hostElems[float64](a), hostElems[float64](b))
			return
		}
		binVV(op, hostElems[float32](y), hostElems[float32](a), hostElems[float32](b))
	}
}

// cpuGrad is dx = f(dy, s) elementwise, s being what the op saved.
func cpuGrad(f64 func(g, s float64) float64, f32 func(g, s float32) float32) func(dx, dy, s *Tensor) {
	return func(dx, dy, s *Tensor) {
		if dx.dtype == Float64 {
			gradLoop(hostElems[float64](dx), hostElems[float64](dy), hostElems[float64](s), f64)
			return
		}
		gradLoop(hostElems[float32](dx), hostElems[float32](dy), hostElems[float32](s), f32)
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
		reluBwd64(hostElems[float64](dx), hostElems[float64](dy), hostElems[float64](y))
		return
	}
	ReLUBackwardF32(hostElems[float32](dx), hostElems[float32](dy), hostElems[float32](y))
}

func cpuGELUBackward(dx, dy, x *Tensor) {
	if dy.dtype == Float64 {
		geluBwd64(hostElems[float64](dx), hostElems[float64](dy), hostElems[float64](x))
		return
	}
	GELUGradF32(hostElems[float32](dx), hostElems[float32](dy), hostElems[float32](x))
}

// cpuGELUWithGrad is float32 only (UnaryForward calls it for float32
// operands): float64, which serves the gradient checks, recomputes the
// derivative in the backward (GELUBackward).
func cpuGELUWithGrad(y, d, x *Tensor) {
	GELUWithGradF32(hostElems[float32](y), hostElems[float32](d), hostElems[float32](x))
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
