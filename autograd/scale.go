package autograd

import "github.com/goddp/goddp/tensor"

// Scale returns s*a for a number s (torch's a * s with a Python float),
// whose gradient is s*gy. Unlike Mul by a constant tensor it needs no
// broadcasting, so a device runs it, value and gradient, with its Scale
// kernel (tensor.ScaleInto): GradScaler scales a device loss with it.
func Scale(a *Variable, s float64) *Variable {
	y := a.Value.Clone()
	tensor.ScaleInto(y, s)
	return FromOp(y, &scaleOp{inputs: ins(a), s: s})
}

type scaleOp struct {
	inputs
	s float64
}

func (o *scaleOp) Name() string { return "Scale" }
func (o *scaleOp) freshGrads()  {}

func (o *scaleOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := gy.Clone()
	tensor.ScaleInto(g, o.s)
	return []*tensor.Tensor{g}
}

// backwardInPlace scales gy itself: the engine hands it over only when no
// one else holds it.
func (o *scaleOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	tensor.ScaleInto(gy, o.s)
	return []*tensor.Tensor{gy}
}
