package autograd

import "github.com/goddp/goddp/tensor"

// Sub returns a - b with broadcasting.
func Sub(a, b *Variable) *Variable {
	return FromOp(tensor.Sub(a.Value, b.Value), &subOp{ins(a, b)})
}

type subOp struct{ inputs }

func (o *subOp) Name() string { return "Sub" }

func (o *subOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	var gb *tensor.Tensor
	if needs(o.in(1)) {
		gb = tensor.Neg(gy)
	}
	return []*tensor.Tensor{gy, gb}
}
