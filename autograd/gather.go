package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Gather picks one element of a per position along axis: for a of shape
// [..., n, ...] (n at axis) the result has a's shape without axis, and
// out[o, i] = a[o, index[o*inner+i], i]. It is torch.gather with an index of
// shape [..., 1, ...] squeezed at axis (how cross-entropy picks the target
// log-probability). len(index) must equal the result's size; an index out of
// range panics.
func Gather(a *Variable, axis int, index []int) *Variable {
	x := a.Value.Contiguous()
	shape := x.Shape()
	axis = normAxis("Gather", axis, len(shape))
	outer, n, inner := splitAt(shape, axis)
	if len(index) != outer*inner {
		panic(fmt.Sprintf("autograd: Gather: %d indices for shape %v along axis %d (want %d)", len(index), shape, axis, outer*inner))
	}
	for k, j := range index {
		if j < 0 || j >= n {
			panic(fmt.Sprintf("autograd: Gather: index[%d] = %d out of range [0, %d) for shape %v axis %d", k, j, n, shape, axis))
		}
	}
	oshape := append(cloneInts(shape[:axis]), shape[axis+1:]...)
	y := tensor.New(x.DType(), oshape...)
	if x.DType() == tensor.Float64 {
		gatherKernel(y.F64(), x.F64(), index, n, inner, false)
	} else {
		gatherKernel(y.F32(), x.F32(), index, n, inner, false)
	}
	return FromOp(y, &gatherOp{inputs: ins(a), index: index, n: n, inner: inner})
}

// gatherKernel copies x[o, index[k], i] to y[k] (k = o*inner + i), or with
// scatter set adds y[k] back into x at that place.
func gatherKernel[T float](y, x []T, index []int, n, inner int, scatter bool) {
	for k, j := range index {
		o, i := k/inner, k%inner
		p := (o*n+j)*inner + i
		if scatter {
			x[p] += y[k]
		} else {
			y[k] = x[p]
		}
	}
}

type gatherOp struct {
	inputs
	index    []int
	n, inner int
}

func (o *gatherOp) Name() string { return "Gather" }
func (o *gatherOp) freshGrads()  {}

func (o *gatherOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	gx := tensor.New(gy.DType(), o.in(0).Value.Shape()...)
	if gx.DType() == tensor.Float64 {
		gatherKernel(gy.F64(), gx.F64(), o.index, o.n, o.inner, true)
	} else {
		gatherKernel(gy.F32(), gx.F32(), o.index, o.n, o.inner, true)
	}
	return []*tensor.Tensor{gx}
}
