package autograd

import "github.com/goddp/goddp/tensor"

// IndexSelect returns the slices of a at positions idx along axis (repeats
// allowed), as torch.index_select; an embedding lookup is
// IndexSelect(weight, 0, ids). Backward scatter-adds gy into the selected
// rows, straight into a's Grad buffer when it exists, so an embedding table
// gets no table-sized temporary per step.
func IndexSelect(a *Variable, axis int, idx []int) *Variable {
	return FromOp(tensor.IndexSelect(a.Value, axis, idx), &indexSelectOp{inputs: ins(a), axis: axis, idx: idx})
}

type indexSelectOp struct {
	inputs
	axis int
	idx  []int
}

func (o *indexSelectOp) Name() string { return "IndexSelect" }
func (o *indexSelectOp) freshGrads()  {}

func (o *indexSelectOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *indexSelectOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	if len(dst) > 0 && dst[0] != nil {
		tensor.IndexAdd(dst[0], o.axis, o.idx, gy)
		return []*tensor.Tensor{nil}
	}
	gx := zerosLike(gy, o.in(0).Value.Shape()...)
	tensor.IndexAdd(gx, o.axis, o.idx, gy)
	return []*tensor.Tensor{gx}
}
