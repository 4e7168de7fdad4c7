package autograd

import "github.com/goddp/goddp/tensor"

// Transpose swaps dimensions d0 and d1 of a (negative counts from the end).
// The result is a strided view sharing a's storage, as in torch; ops that
// need contiguous data copy it.
func Transpose(a *Variable, d0, d1 int) *Variable {
	return FromOp(tensor.Transpose(a.Value, d0, d1), &transposeOp{inputs: ins(a), d0: d0, d1: d1})
}

// transposeOp returns a view of gy, so it is not a freshGrads op.
type transposeOp struct {
	inputs
	d0, d1 int
}

func (o *transposeOp) Name() string { return "Transpose" }

func (o *transposeOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.Transpose(gy, o.d0, o.d1)}
}
