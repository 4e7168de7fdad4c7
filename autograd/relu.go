package autograd

import "github.com/goddp/goddp/tensor"

// ReLU returns max(a, 0) elementwise. Its gradient at 0 is 0, as in torch.
func ReLU(a *Variable) *Variable {
	y := tensor.ReLU(a.Value)
	return FromOp(y, &reluOp{inputs: ins(a), y: y})
}

type reluOp struct {
	inputs
	y *tensor.Tensor
}

func (o *reluOp) Name() string { return "ReLU" }
func (o *reluOp) freshGrads()  {}

func (o *reluOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardTo(gy, tensor.EmptyAs(gy, gy.Shape()...)) // ReLUBackward writes every element
}

// backwardInPlace masks an owned gy in place.
func (o *reluOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardTo(gy, gy) }

func (o *reluOp) backwardTo(gy, gx *tensor.Tensor) []*tensor.Tensor {
	tensor.ReLUBackward(gx, gy.Contiguous(), o.y)
	return []*tensor.Tensor{gx}
}
