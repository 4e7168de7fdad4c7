package autograd

import "github.com/goddp/goddp/tensor"

// Div returns a / b elementwise with broadcasting.
func Div(a, b *Variable) *Variable {
	y := tensor.Div(a.Value, b.Value)
	return FromOp(y, &divOp{inputs: ins(a, b), y: y})
}

type divOp struct {
	inputs
	y *tensor.Tensor
}

func (o *divOp) Name() string { return "Div" }
func (o *divOp) freshGrads()  {}

// broadcastGrads: tensor.Div reads a broadcast gy as a scalar operand.
func (o *divOp) broadcastGrads() {}

// Backward: da = gy / b and db = -gy * a / b² = -da * y.
func (o *divOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	a, b := o.in(0), o.in(1)
	grads := make([]*tensor.Tensor, 2)
	ga := tensor.Div(gy, b.Value)
	if needs(b) {
		gb := tensor.Mul(ga, o.y)
		negate(gb)
		grads[1] = gb
	}
	if needs(a) {
		grads[0] = ga
	}
	return grads
}
