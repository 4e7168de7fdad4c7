package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Permute reorders a's dimensions: dimension i of the result is a's dimension
// dims[i] (negative counts from the end), as torch.permute. The result is a
// strided view sharing a's storage; its gradient is gy permuted back.
func Permute(a *Variable, dims ...int) *Variable {
	r := a.Value.Dim()
	if len(dims) != r {
		panic(fmt.Sprintf("autograd: Permute: %d dims %v for shape %v", len(dims), dims, a.Value.Shape()))
	}
	inv := make([]int, r)
	for i, d := range dims {
		inv[normAxis("Permute", d, r)] = i
	}
	return FromOp(tensor.Permute(a.Value, dims...), &permuteOp{inputs: ins(a), inv: inv})
}

// permuteOp returns a view of gy, so it is not a freshGrads op.
type permuteOp struct {
	inputs
	inv []int // the inverse permutation
}

func (o *permuteOp) Name() string { return "Permute" }

func (o *permuteOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.Permute(gy, o.inv...)}
}
