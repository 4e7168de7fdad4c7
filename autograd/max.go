package autograd

import "github.com/goddp/goddp/tensor"

// Max returns the maximum of a along axis (negative counts from the end),
// keeping that dimension as size 1 when keepDim is set. The gradient flows to
// the first maximal element of each slice (NaN counts as maximal, as in torch).
func Max(a *Variable, axis int, keepDim bool) *Variable {
	y, arg := tensor.MaxDim(a.Value, axis, keepDim)
	return FromOp(y, &maxOp{inputs: ins(a), arg: arg, axis: axis})
}

type maxOp struct {
	inputs
	arg  *tensor.Tensor // the maximum's position along axis, per output element, on the op's device
	axis int
}

func (o *maxOp) Name() string { return "Max" }
func (o *maxOp) freshGrads()  {}

func (o *maxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.MaxDimBackward(gy, o.arg, o.in(0).Value.Shape(), o.axis)}
}
