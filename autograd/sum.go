package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Sum returns the sum of a over axes (nil means all; negative axes count from
// the end), keeping the reduced dimensions as size 1 when keepDim is set.
func Sum(a *Variable, axes []int, keepDim bool) *Variable {
	y, kshape := reduceAxes("Sum", a.Value, axes, keepDim, false)
	return FromOp(y, &sumOp{inputs: ins(a), kshape: kshape, scale: 1, name: "Sum"})
}

// reduceAxes sums (or averages) x over axes. It returns the result and the
// keep-dim shape the gradient must be viewed at before broadcasting back.
func reduceAxes(op string, x *tensor.Tensor, axes []int, keepDim, mean bool) (*tensor.Tensor, []int) {
	shape := x.Shape()
	reduced := make([]bool, len(shape))
	if axes == nil {
		for i := range reduced {
			reduced[i] = true
		}
	}
	for _, ax := range axes {
		ax = normAxis(op, ax, len(shape))
		if reduced[ax] {
			panic(fmt.Sprintf("autograd: %s: axis %d repeated in %v for shape %v", op, ax, axes, shape))
		}
		reduced[ax] = true
	}
	kshape := make([]int, len(shape))
	var oshape []int
	count := 1
	for i, d := range shape {
		if reduced[i] {
			kshape[i] = 1
			count *= d
			if keepDim {
				oshape = append(oshape, 1)
			}
			continue
		}
		kshape[i] = d
		oshape = append(oshape, d)
	}
	y := tensor.ZerosAs(x, kshape...)
	reduceInto(y, x, op)
	if mean {
		tensor.ScaleInto(y, 1/float64(count))
	}
	return y.Reshape(oshape...), kshape
}

// sumOp spreads gy (viewed at the keep-dim shape) back over the input,
// scaled by 1/count for Mean.
type sumOp struct {
	inputs
	kshape []int
	scale  float64
	name   string
}

func (o *sumOp) Name() string { return o.name }
func (o *sumOp) freshGrads()  {}

func (o *sumOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	// A scale other than 1 means an axis longer than 1 was reduced, so gx
	// is a new tensor, not gy, and may be scaled in place.
	gx := broadcastTo(gy.Reshape(o.kshape...), o.in(0).Value.Shape())
	if o.scale != 1 {
		tensor.ScaleInto(gx, o.scale)
	}
	return []*tensor.Tensor{gx}
}
