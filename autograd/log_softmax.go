package autograd

import (
	"math"

	"goddp/tensor"
)

// LogSoftmax returns a - logsumexp(a) along axis (negative counts from the
// end), computed stably. Its gradient is gy - exp(y) * sum(gy) along axis.
func LogSoftmax(a *Variable, axis int) *Variable {
	if !a.Value.IsCPU() {
		return logSoftmaxDevice(a, axis)
	}
	x := a.Value.Contiguous()
	axis = normAxis("LogSoftmax", axis, x.Dim())
	outer, n, inner := splitAt(x.Shape(), axis)
	y := tensor.New(x.DType(), x.Shape()...)
	if x.DType() == tensor.Float64 {
		softmaxFwd(y.F64(), x.F64(), outer, n, inner, true)
	} else {
		softmaxFwd(y.F32(), x.F32(), outer, n, inner, true)
	}
	return FromOp(y, &logSoftmaxOp{inputs: ins(a), y: y, outer: outer, n: n, inner: inner})
}

type logSoftmaxOp struct {
	inputs
	y               *tensor.Tensor
	outer, n, inner int
}

func (o *logSoftmaxOp) Name() string { return "LogSoftmax" }
func (o *logSoftmaxOp) freshGrads()  {}

func (o *logSoftmaxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *logSoftmaxOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *logSoftmaxOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { logSoftmaxBwd(gx, gy, o.y.F32(), o.outer, o.n, o.inner) },
		func(gx, gy []float64) { logSoftmaxBwd(gx, gy, o.y.F64(), o.outer, o.n, o.inner) })
}

func logSoftmaxBwd[T float](gx, gy, y []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*n*inner + i
			var s T
			for j := 0; j < n; j++ {
				s += gy[base+j*inner]
			}
			for j := 0; j < n; j++ {
				k := base + j*inner
				gx[k] = gy[k] - T(math.Exp(float64(y[k])))*s
			}
		}
	}
}
