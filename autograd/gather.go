package autograd

import "github.com/goddp/goddp/tensor"

// Gather picks one element of a per position along axis: for a of shape
// [..., n, ...] (n at axis) the result has a's shape without axis, and
// out[o, i] = a[o, index[o*inner+i], i]. It is torch.gather with an index of
// shape [..., 1, ...] squeezed at axis (how cross-entropy picks the target
// log-probability). len(index) must equal the result's size; an index out of
// range panics.
func Gather(a *Variable, axis int, index []int) *Variable {
	return FromOp(tensor.Gather(a.Value, axis, index), &gatherOp{inputs: ins(a), axis: axis, index: index})
}

type gatherOp struct {
	inputs
	axis  int
	index []int
}

func (o *gatherOp) Name() string { return "Gather" }
func (o *gatherOp) freshGrads()  {}

func (o *gatherOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gx := tensor.ZerosAs(gy, o.in(0).Value.Shape()...)
	tensor.ScatterAdd(gx, o.axis, o.index, gy)
	return []*tensor.Tensor{gx}
}
