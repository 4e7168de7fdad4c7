package autograd

import "github.com/goddp/goddp/tensor"

// Reshape returns a with a new shape (one dimension may be -1). Like
// tensor.Reshape the result shares a's storage when a is contiguous.
func Reshape(a *Variable, shape ...int) *Variable {
	return FromOp(a.Value.Reshape(shape...), &reshapeOp{inputs: ins(a), name: "Reshape"})
}

// reshapeOp (Reshape and View) returns a view of gy, so it is not a
// freshGrads op.
type reshapeOp struct {
	inputs
	name string
}

func (o *reshapeOp) Name() string { return o.name }

func (o *reshapeOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{gy.Reshape(o.in(0).Value.Shape()...)}
}
