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

// concatAt joins the inputs, each viewed as oshape with sizes[k] along axis
// (Stack's have no such axis: sizes of 1), by tensor.Concat on their device.
func concatAt(name string, axis int, oshape, sizes []int, vs []*Variable) *Variable {
	ts := make([]*tensor.Tensor, len(vs))
	for k, v := range vs {
		shape := cloneInts(oshape)
		shape[axis] = sizes[k]
		ts[k] = v.Value.Reshape(shape...)
	}
	y := tensor.Concat(axis, ts...)
	return FromOp(y, &concatOp{inputs: inputs{more: vs}, name: name, axis: axis, sizes: sizes})
}

type concatOp struct {
	inputs
	name  string
	axis  int
	sizes []int
}

func (o *concatOp) Name() string { return o.name }
func (o *concatOp) freshGrads()  {}

// Backward gives each input its slice of gy along the axis, copied out on
// gy's device.
func (o *concatOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	grads := make([]*tensor.Tensor, len(o.Inputs()))
	off := 0
	for k, v := range o.Inputs() {
		if needs(v) {
			grads[k] = tensor.NarrowCopy(gy, o.axis, off, o.sizes[k]).Reshape(v.Value.Shape()...)
		}
		off += o.sizes[k]
	}
	return grads
}
