package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Concat joins vs along axis (negative counts from the end); every other
// dimension must match. Each input's gradient is its slice of gy.
func Concat(axis int, vs ...*Variable) *Variable {
	if len(vs) == 0 {
		panic("autograd: Concat: no inputs")
	}
	first := vs[0].Value.Shape()
	axis = normAxis("Concat", axis, len(first))
	oshape := cloneInts(first)
	oshape[axis] = 0
	sizes := make([]int, len(vs))
	for k, v := range vs {
		s := v.Value.Shape()
		if len(s) != len(first) {
			panic(fmt.Sprintf("autograd: Concat: shape %v does not match %v", s, first))
		}
		for d := range s {
			if d != axis && s[d] != first[d] {
				panic(fmt.Sprintf("autograd: Concat: shape %v does not match %v along axis %d", s, first, d))
			}
		}
		sameDType("Concat", vs[0].Value, v.Value)
		sizes[k] = s[axis]
		oshape[axis] += s[axis]
	}
	return concatAt("Concat", axis, oshape, sizes, vs)
}

// concatAt copies the inputs, each [outer, sizes[k], inner], into an output of
// shape oshape ([outer, sum(sizes), inner]); Stack uses it with sizes of 1.
func concatAt(name string, axis int, oshape, sizes []int, vs []*Variable) *Variable {
	outer, total, inner := splitAt(oshape, axis)
	y := tensor.New(vs[0].Value.DType(), oshape...)
	off := 0
	for k, v := range vs {
		x := v.Value.Contiguous()
		if y.DType() == tensor.Float64 {
			blockCopy(y.F64(), x.F64(), outer, total, sizes[k], inner, off, false)
		} else {
			blockCopy(y.F32(), x.F32(), outer, total, sizes[k], inner, off, false)
		}
		off += sizes[k]
	}
	return FromOp(y, &concatOp{inputs: inputs{more: vs}, name: name, sizes: sizes, outer: outer, total: total, inner: inner})
}

// blockCopy moves the [outer, size, inner] block x to or from (out set)
// positions [off, off+size) along the middle axis of y ([outer, total, inner]).
func blockCopy[T float](y, x []T, outer, total, size, inner, off int, out bool) {
	run := size * inner
	for o := 0; o < outer; o++ {
		yb := y[(o*total+off)*inner : (o*total+off)*inner+run]
		xb := x[o*run : (o+1)*run]
		if out {
			copy(xb, yb)
		} else {
			copy(yb, xb)
		}
	}
}

type concatOp struct {
	inputs
	name                string
	sizes               []int
	outer, total, inner int
}

func (o *concatOp) Name() string { return o.name }
func (o *concatOp) freshGrads()  {}

func (o *concatOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, len(o.Inputs()))
	off := 0
	for k, v := range o.Inputs() {
		if needs(v) {
			g := tensor.New(gy.DType(), v.Value.Shape()...)
			if g.DType() == tensor.Float64 {
				blockCopy(gy.F64(), g.F64(), o.outer, o.total, o.sizes[k], o.inner, off, true)
			} else {
				blockCopy(gy.F32(), g.F32(), o.outer, o.total, o.sizes[k], o.inner, off, true)
			}
			grads[k] = g
		}
		off += o.sizes[k]
	}
	return grads
}
