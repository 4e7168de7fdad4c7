package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// MaskedFill returns a copy of a with value wherever mask is nonzero, as
// torch's Tensor.masked_fill. goddp tensors hold only floats, so a boolean
// mask is a tensor of 0s and 1s (any nonzero counts as true), for example
// tensor.Triu(tensor.Ones(dt, T, T), 1) for a causal attention mask. mask
// must broadcast to a's shape; value may be ±Inf. The gradient is gy where
// the mask is false and zero where it is true.
func MaskedFill(a *Variable, mask *tensor.Tensor, value float64) *Variable {
	x := a.Value.Contiguous()
	if bs := broadcastShapes("MaskedFill", mask.Shape(), x.Shape()); !slices.Equal(bs, x.Shape()) {
		panic(fmt.Sprintf("autograd: MaskedFill: mask of shape %v does not broadcast to the input's %v", mask.Shape(), x.Shape()))
	}
	y, m := tensor.Where(mask, nil, x, value, 0, x.Shape())
	return FromOp(y, &maskedFillOp{inputs: ins(a), mask: m})
}

type maskedFillOp struct {
	inputs
	mask *tensor.Tensor // broadcast to the input's shape, on its device
}

func (o *maskedFillOp) Name() string { return "MaskedFill" }
func (o *maskedFillOp) freshGrads()  {}

func (o *maskedFillOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.MaskedGrad(o.mask, gy.Contiguous(), false)}
}
