package autograd

import "goddp/tensor"

// Mul returns a * b elementwise with broadcasting.
func Mul(a, b *Variable) *Variable {
	return FromOp(tensor.Mul(a.Value, b.Value), &mulOp{ins(a, b)})
}

type mulOp struct{ inputs }

func (o *mulOp) Name() string { return "Mul" }
func (o *mulOp) freshGrads()  {}

func (o *mulOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	a, b := o.in(0), o.in(1)
	grads := make([]*tensor.Tensor, 2)
	if needs(a) {
		grads[0] = tensor.Mul(gy, b.Value)
	}
	if needs(b) {
		grads[1] = tensor.Mul(gy, a.Value)
	}
	return grads
}
