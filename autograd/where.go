package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Where returns a where cond is nonzero and b elsewhere, as torch.where(cond,
// a, b). cond is a 0/1 float tensor standing for torch's bool tensor; cond,
// a and b broadcast together to the result's shape. a's gradient is gy where
// cond holds, b's where it does not (each reduced to its input's shape by the
// engine).
func Where(cond *tensor.Tensor, a, b *Variable) *Variable {
	sameDType("Where", a.Value, b.Value)
	shape := broadcastShapes("Where", cond.Shape(), a.Value.Shape(), b.Value.Shape())
	y, m := tensor.Where(cond, a.Value, b.Value, 0, 0, shape)
	return FromOp(y, &whereOp{inputs: ins(a, b), mask: m})
}

type whereOp struct {
	inputs
	mask *tensor.Tensor // at the result's shape, on its device
}

func (o *whereOp) Name() string { return "Where" }
func (o *whereOp) freshGrads()  {}

func (o *whereOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	for k, onTrue := range []bool{true, false} {
		if needs(o.in(k)) {
			grads[k] = tensor.MaskedGrad(o.mask, gy, onTrue)
		}
	}
	return grads
}

// broadcastShapes returns the shape that all of shapes broadcast to (numpy
// rules), panicking with op's name when they do not.
func broadcastShapes(op string, shapes ...[]int) []int {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for j, d := range s {
			i := r - len(s) + j
			switch {
			case d == out[i] || d == 1:
			case out[i] == 1:
				out[i] = d
			default:
				panic(fmt.Sprintf("autograd: %s: shapes %v do not broadcast", op, shapes))
			}
		}
	}
	return out
}
