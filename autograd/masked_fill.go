package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// MaskedFill returns a copy of a with value wherever mask is nonzero, as
// torch's Tensor.masked_fill. goddp tensors hold only floats, so a boolean
// mask is a tensor of 0s and 1s (any nonzero counts as true), for example
// tensor.Triu(tensor.Ones(dt, T, T), 1) for a causal attention mask. mask
// must broadcast to a's shape; value may be ±Inf. The gradient is gy where
// the mask is false and zero where it is true.
func MaskedFill(a *Variable, mask *tensor.Tensor, value float64) *Variable {
	x := a.Value.Contiguous()
	if bs := broadcastShapes("MaskedFill", mask.Shape(), x.Shape()); !slices.Equal(bs, x.Shape()) {
		panic(fmt.Sprintf("autograd: MaskedFill: mask of shape %v does not broadcast to the input's %v", mask.Shape(), x.Shape()))
	}
	if y, m := tensor.WhereDevice(mask, nil, x, value, 0, x.Shape()); y != nil {
		return FromOp(y, &maskedFillOp{inputs: ins(a), mask: m})
	}
	m := broadcastTo(tensor.AsType(mask, x.DType()), x.Shape())
	y := x.Clone()
	if y.DType() == tensor.Float64 {
		maskedFillKernel(y.F64(), m.F64(), value)
	} else {
		maskedFillKernel(y.F32(), m.F32(), float32(value))
	}
	return FromOp(y, &maskedFillOp{inputs: ins(a), mask: m})
}

// maskedFillKernel sets y[i] = value wherever m[i] != 0.
func maskedFillKernel[T float](y, m []T, value T) {
	for i, v := range m {
		if v != 0 {
			y[i] = value
		}
	}
}

type maskedFillOp struct {
	inputs
	mask *tensor.Tensor // broadcast to the input's shape
}

func (o *maskedFillOp) Name() string { return "MaskedFill" }
func (o *maskedFillOp) freshGrads()  {}

func (o *maskedFillOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *maskedFillOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *maskedFillOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.MaskedGradDevice(o.mask, gy, false); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { maskedGrad(gx, gy, o.mask.F32(), false) },
		func(gx, gy []float64) { maskedGrad(gx, gy, o.mask.F64(), false) })
}

// maskedGrad writes gx = gy where the mask is false (or, with onTrue, where
// it is true) and 0 elsewhere; gx may alias gy.
func maskedGrad[T float](gx, gy, m []T, onTrue bool) {
	for i, v := range m {
		if (v != 0) == onTrue {
			gx[i] = gy[i]
		} else {
			gx[i] = 0
		}
	}
}
