package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Max returns the maximum of a along axis (negative counts from the end),
// keeping that dimension as size 1 when keepDim is set. The gradient flows to
// the first maximal element of each slice (NaN counts as maximal, as in torch).
func Max(a *Variable, axis int, keepDim bool) *Variable {
	x := a.Value.Contiguous()
	shape := x.Shape()
	if len(shape) == 0 {
		panic("autograd: Max: needs at least one dimension, got a 0-d tensor")
	}
	axis = normAxis("Max", axis, len(shape))
	outer, n, inner := splitAt(shape, axis)
	if n == 0 {
		panic(fmt.Sprintf("autograd: Max: empty axis %d of shape %v", axis, shape))
	}
	var oshape []int
	for i, d := range shape {
		if i != axis {
			oshape = append(oshape, d)
		} else if keepDim {
			oshape = append(oshape, 1)
		}
	}
	y := tensor.New(x.DType(), oshape...)
	arg := make([]int32, outer*inner)
	if x.DType() == tensor.Float64 {
		maxFwd(y.F64(), arg, x.F64(), outer, n, inner)
	} else {
		maxFwd(y.F32(), arg, x.F32(), outer, n, inner)
	}
	return FromOp(y, &maxOp{inputs: ins(a), arg: arg, n: n, inner: inner})
}

func maxFwd[T float](y []T, arg []int32, x []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		base := o * n * inner
		out, am := y[o*inner:(o+1)*inner], arg[o*inner:(o+1)*inner]
		copy(out, x[base:base+inner])
		clear(am)
		for j := 1; j < n; j++ {
			row := x[base+j*inner : base+(j+1)*inner]
			for i, v := range row {
				if v > out[i] || (v != v && out[i] == out[i]) {
					out[i], am[i] = v, int32(j)
				}
			}
		}
	}
}

type maxOp struct {
	inputs
	arg      []int32 // index of the maximum along the axis, per output element
	n, inner int
}

func (o *maxOp) Name() string { return "Max" }
func (o *maxOp) freshGrads()  {}

func (o *maxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	gx := tensor.New(gy.DType(), o.in(0).Value.Shape()...)
	if gx.DType() == tensor.Float64 {
		maxBwd(gx.F64(), gy.F64(), o.arg, o.n, o.inner)
	} else {
		maxBwd(gx.F32(), gy.F32(), o.arg, o.n, o.inner)
	}
	return []*tensor.Tensor{gx}
}

func maxBwd[T float](gx, gy []T, arg []int32, n, inner int) {
	for k, g := range gy {
		o, i := k/inner, k%inner
		gx[(o*n+int(arg[k]))*inner+i] += g
	}
}
