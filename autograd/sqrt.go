package autograd

import "github.com/goddp/goddp/tensor"

// Sqrt returns the square root of a; its gradient is gy / (2 sqrt(a)).
func Sqrt(a *Variable) *Variable {
	y := tensor.Sqrt(a.Value)
	return FromOp(y, &sqrtOp{inputs: ins(a), y: y})
}

type sqrtOp struct {
	inputs
	y *tensor.Tensor
}

func (o *sqrtOp) Name() string { return "Sqrt" }
func (o *sqrtOp) freshGrads()  {}

func (o *sqrtOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *sqrtOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *sqrtOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.UnaryGradDevice("Sqrt", gy, o.y); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { divKernel(gx, gy, o.y.F32(), 2) },
		func(gx, gy []float64) { divKernel(gx, gy, o.y.F64(), 2) })
}
