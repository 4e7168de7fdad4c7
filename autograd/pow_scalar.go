package autograd

import "github.com/goddp/goddp/tensor"

// PowScalar returns a ** p elementwise; its gradient is gy * p * a**(p-1).
func PowScalar(a *Variable, p float64) *Variable {
	return FromOp(tensor.PowScalar(a.Value, p), &powScalarOp{inputs: ins(a), x: a.Value.Contiguous(), p: p})
}

type powScalarOp struct {
	inputs
	x *tensor.Tensor // the input, contiguous, on the op's device
	p float64
}

func (o *powScalarOp) Name() string { return "PowScalar" }
func (o *powScalarOp) freshGrads()  {}

func (o *powScalarOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.PowScalarBackward(gy, o.x, o.p, false)}
}

// backwardInPlace writes the gradient over an owned gy.
func (o *powScalarOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.PowScalarBackward(gy, o.x, o.p, true)}
}
