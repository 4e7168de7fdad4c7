package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// IndexSelect returns the slices of a at positions idx along axis (repeats
// allowed), as torch.index_select; an embedding lookup is
// IndexSelect(weight, 0, ids). Backward scatter-adds gy into the selected
// rows, straight into a's Grad buffer when it exists, so an embedding table
// gets no table-sized temporary per step.
func IndexSelect(a *Variable, axis int, idx []int) *Variable {
	x := a.Value.Contiguous()
	shape := x.Shape()
	axis = normAxis("IndexSelect", axis, len(shape))
	outer, n, inner := splitAt(shape, axis)
	for k, j := range idx {
		if j < 0 || j >= n {
			panic(fmt.Sprintf("autograd: IndexSelect: idx[%d] = %d out of range [0, %d) for shape %v axis %d", k, j, n, shape, axis))
		}
	}
	oshape := cloneInts(shape)
	oshape[axis] = len(idx)
	if y := tensor.IndexSelectDevice(x, idx, outer, n, inner, oshape); y != nil {
		return FromOp(y, &indexSelectOp{inputs: ins(a), idx: idx, outer: outer, n: n, inner: inner})
	}
	y := tensor.New(x.DType(), oshape...)
	if x.DType() == tensor.Float64 {
		indexSelectKernel(y.F64(), x.F64(), idx, outer, n, inner, false)
	} else {
		indexSelectKernel(y.F32(), x.F32(), idx, outer, n, inner, false)
	}
	return FromOp(y, &indexSelectOp{inputs: ins(a), idx: idx, outer: outer, n: n, inner: inner})
}

// indexSelectKernel copies the idx rows of x ([outer, n, inner]) into y
// ([outer, len(idx), inner]), or with scatter set adds y's rows back into x.
func indexSelectKernel[T float](y, x []T, idx []int, outer, n, inner int, scatter bool) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		for k, j := range idx {
			dst := y[(o*m+k)*inner : (o*m+k+1)*inner]
			src := x[(o*n+j)*inner : (o*n+j+1)*inner]
			if scatter {
				for i, v := range dst {
					src[i] += v
				}
			} else {
				copy(dst, src)
			}
		}
	}
}

type indexSelectOp struct {
	inputs
	idx             []int
	outer, n, inner int
}

func (o *indexSelectOp) Name() string { return "IndexSelect" }
func (o *indexSelectOp) freshGrads()  {}

func (o *indexSelectOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *indexSelectOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	var gx *tensor.Tensor
	var grads []*tensor.Tensor
	if len(dst) > 0 && dst[0] != nil {
		gx, grads = dst[0], []*tensor.Tensor{nil}
	} else {
		gx = zerosLike(gy, o.in(0).Value.Shape()...)
		grads = []*tensor.Tensor{gx}
	}
	if tensor.IndexAddDevice(gx, gy, o.idx, o.outer, o.n, o.inner) {
		return grads
	}
	if gx.DType() == tensor.Float64 {
		indexSelectKernel(gy.F64(), gx.F64(), o.idx, o.outer, o.n, o.inner, true)
	} else {
		indexSelectKernel(gy.F32(), gx.F32(), o.idx, o.outer, o.n, o.inner, true)
	}
	return grads
}
