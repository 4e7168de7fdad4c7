package autograd

import "goddp/tensor"

// SumAll returns the sum of every element of a as a 0-d tensor (torch's
// a.sum()). It accumulates in float64.
func SumAll(a *Variable) *Variable {
	if !a.Value.IsCPU() {
		return sumAllDevice(a, 1, "SumAll")
	}
	x := a.Value.Contiguous()
	y := tensor.New(x.DType())
	s := 0.0
	if x.DType() == tensor.Float64 {
		s = sumF64(x.F64())
		y.F64()[0] = s
	} else {
		s = sumF64(x.F32())
		y.F32()[0] = float32(s)
	}
	return FromOp(y, &sumAllOp{inputs: ins(a), scale: 1})
}

// sumF64 sums v in float64.
func sumF64[T float](v []T) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	return s
}

// sumAllOp is SumAll's (scale 1) and MeanAll's (scale 1/n) backward: every
// input element receives scale * gy.
type sumAllOp struct {
	inputs
	scale float64
	name  string
}

func (o *sumAllOp) Name() string {
	if o.name != "" {
		return o.name
	}
	return "SumAll"
}
func (o *sumAllOp) freshGrads()     {}
func (o *sumAllOp) broadcastGrads() {}

// Backward returns scale*gy as a new scalar expanded (stride 0) to the
// input's shape: consumers that take broadcast gradients (Mul, Add, a leaf's
// Grad) read it without a tensor of the input's size being filled; the
// engine materialises it for any other op.
func (o *sumAllOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := gy.Item() * o.scale
	s := tensor.New(gy.DType()) // set directly: Fill would turn -0 into +0
	if s.DType() == tensor.Float64 {
		s.F64()[0] = g
	} else {
		s.F32()[0] = float32(g)
	}
	return []*tensor.Tensor{tensor.Expand(s, o.in(0).Value.Shape()...)}
}
