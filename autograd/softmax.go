package autograd

import "github.com/goddp/goddp/tensor"

// Softmax returns exp(a) / sum(exp(a)) along axis (negative counts from the
// end), computed stably. Its gradient is y * (gy - sum(gy * y)) along axis.
func Softmax(a *Variable, axis int) *Variable { return softmax("Softmax", a, axis, false) }

// LogSoftmax returns a - logsumexp(a) along axis (negative counts from the
// end), computed stably. Its gradient is gy - exp(y) * sum(gy) along axis.
func LogSoftmax(a *Variable, axis int) *Variable { return softmax("LogSoftmax", a, axis, true) }

func softmax(name string, a *Variable, axis int, log bool) *Variable {
	axis = normAxis(name, axis, a.Value.Dim())
	var y *tensor.Tensor
	if log {
		y = tensor.LogSoftmax(a.Value, axis)
	} else {
		y = tensor.Softmax(a.Value, axis)
	}
	return FromOp(y, &softmaxOp{inputs: ins(a), y: y, axis: axis, log: log})
}

// softmaxOp is Softmax or LogSoftmax (log): both keep their output, from
// which tensor's backward entries compute the gradient.
type softmaxOp struct {
	inputs
	y    *tensor.Tensor
	axis int
	log  bool
}

func (o *softmaxOp) Name() string {
	if o.log {
		return "LogSoftmax"
	}
	return "Softmax"
}
func (o *softmaxOp) freshGrads() {}

func (o *softmaxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *softmaxOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

// run writes the gradient into gy itself when the engine owns it (inPlace).
func (o *softmaxOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	g := gy.Contiguous()
	gx := g
	if !inPlace && g == gy {
		gx = tensor.EmptyAs(g, g.Shape()...) // written whole
	}
	if o.log {
		tensor.LogSoftmaxBackward(gx, g, o.y, o.axis)
	} else {
		tensor.SoftmaxBackward(gx, g, o.y, o.axis)
	}
	return []*tensor.Tensor{gx}
}
