package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Narrow returns a[..., start:start+length, ...] along axis (negative counts
// from the end) as a view sharing a's storage, as torch.narrow. Its gradient
// is zero outside the slice and gy inside it.
func Narrow(a *Variable, axis, start, length int) *Variable {
	shape := a.Value.Shape()
	axis = normAxis("Narrow", axis, len(shape))
	if start < 0 || length < 0 || start+length > shape[axis] {
		panic(fmt.Sprintf("autograd: Narrow: [%d, %d) out of range for axis %d of shape %v", start, start+length, axis, shape))
	}
	return FromOp(tensor.Narrow(a.Value, axis, start, length), &narrowOp{inputs: ins(a), axis: axis, start: start, length: length})
}

type narrowOp struct {
	inputs
	axis, start, length int
}

func (o *narrowOp) Name() string { return "Narrow" }
func (o *narrowOp) freshGrads()  {}

func (o *narrowOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := tensor.New(gy.DType(), o.in(0).Value.Shape()...)
	tensor.CopyFrom(tensor.Narrow(g, o.axis, o.start, o.length), gy)
	return []*tensor.Tensor{g}
}
