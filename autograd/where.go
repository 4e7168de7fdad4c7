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
	if y, m := tensor.WhereDevice(cond, a.Value, b.Value, 0, 0, shape); y != nil {
		return FromOp(y, &whereOp{inputs: ins(a, b), mask: m})
	}
	dt := a.Value.DType()
	m := broadcastTo(tensor.AsType(cond, dt), shape)
	x, z := broadcastTo(a.Value, shape), broadcastTo(b.Value, shape)
	if dt == tensor.Float64 {
		whereKernel(x.F64(), m.F64(), z.F64())
	} else {
		whereKernel(x.F32(), m.F32(), z.F32())
	}
	return FromOp(x, &whereOp{inputs: ins(a, b), mask: m})
}

// whereKernel overwrites a[i] with b[i] wherever m[i] is zero.
func whereKernel[T float](a, m, b []T) {
	for i, v := range m {
		if v == 0 {
			a[i] = b[i]
		}
	}
}

type whereOp struct {
	inputs
	mask *tensor.Tensor // at the result's shape
}

func (o *whereOp) Name() string { return "Where" }
func (o *whereOp) freshGrads()  {}

func (o *whereOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	for k, onTrue := range []bool{true, false} {
		if !needs(o.in(k)) {
			continue
		}
		if g := tensor.MaskedGradDevice(o.mask, gy, onTrue); g != nil {
			grads[k] = g
			continue
		}
		g := tensor.New(gy.DType(), gy.Shape()...)
		if g.DType() == tensor.Float64 {
			maskedGrad(g.F64(), gy.F64(), o.mask.F64(), onTrue)
		} else {
			maskedGrad(g.F32(), gy.F32(), o.mask.F32(), onTrue)
		}
		grads[k] = g
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
