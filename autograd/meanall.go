package autograd

import "github.com/goddp/goddp/tensor"

// MeanAll returns the mean of every element of a as a 0-d tensor (torch's
// a.mean()). It accumulates in float64 in SumAll's order.
func MeanAll(a *Variable) *Variable {
	n := a.Value.Numel()
	return FromOp(tensor.MeanAllOf(a.Value), &sumAllOp{inputs: ins(a), scale: 1 / float64(n), name: "MeanAll"})
}
