package autograd

import "github.com/goddp/goddp/tensor"

// LogSoftmax returns a - logsumexp(a) along axis (negative counts from the
// end), computed stably. Its gradient is gy - exp(y) * sum(gy) along axis.
func LogSoftmax(a *Variable, axis int) *Variable {
	axis = normAxis("LogSoftmax", axis, a.Value.Dim())
	y := tensor.LogSoftmax(a.Value, axis)
	return FromOp(y, &logSoftmaxOp{inputs: ins(a), y: y, axis: axis})
}

type logSoftmaxOp struct {
	inputs
	y    *tensor.Tensor
	axis int
}

func (o *logSoftmaxOp) Name() string { return "LogSoftmax" }
func (o *logSoftmaxOp) freshGrads()  {}

func (o *logSoftmaxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *logSoftmaxOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

// run writes the gradient into gy itself when the engine owns it (inPlace).
func (o *logSoftmaxOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	gy = gy.Contiguous()
	gx := gy
	if !inPlace {
		gx = tensor.ZerosAs(gy, gy.Shape()...)
	}
	tensor.LogSoftmaxBackward(gx, gy, o.y, o.axis)
	return []*tensor.Tensor{gx}
}
