package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// sameDType panics, naming op and shapes, unless all tensors share a dtype.
func sameDType(op string, ts ...*tensor.Tensor) {
	for _, t := range ts[1:] {
		if t != nil && t.DType() != ts[0].DType() {
			panic(fmt.Sprintf("autograd: %s: dtype mismatch %v%v vs %v%v", op, ts[0].DType(), ts[0].Shape(), t.DType(), t.Shape()))
		}
	}
}

// normAxis turns a possibly negative axis into [0, rank), panicking with op's
// name when it is out of range.
func normAxis(op string, axis, rank int) int {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		panic(fmt.Sprintf("autograd: %s: axis %d out of range for rank %d", op, axis, rank))
	}
	return axis
}

// splitAt returns the products of shape[:axis], shape[axis] and shape[axis+1:].
func splitAt(shape []int, axis int) (outer, n, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, shape[axis], inner
}

// needs reports whether input v takes part in the current backward pass.
func needs(v *Variable) bool { return v != nil && v.requiresGrad }

func cloneInts(s []int) []int { return append([]int(nil), s...) }

// inputs holds an op's input list inside the op's own allocation, so that
// recording an op costs one allocation and Inputs, which the engine calls
// several times per pass, none. Variadic ops (Concat, Stack) use more.
type inputs struct {
	arr  [3]*Variable
	n    int
	more []*Variable
}

// ins builds the inputs of a fixed-arity op (at most 3).
func ins(vs ...*Variable) inputs {
	var in inputs
	in.n = copy(in.arr[:], vs)
	return in
}

// Inputs implements Op.
func (in *inputs) Inputs() []*Variable {
	if in.more != nil {
		return in.more
	}
	return in.arr[:in.n:in.n]
}

// in returns input k.
func (in *inputs) in(k int) *Variable { return in.Inputs()[k] }
