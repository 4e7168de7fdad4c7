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
func (o *sumAllOp) freshGrads() {}

func (o *sumAllOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := gy.Item() * o.scale
	gx := tensor.New(gy.DType(), o.in(0).Value.Shape()...)
	if gx.DType() == tensor.Float64 {
		fill(gx.F64(), g)
	} else {
		fill(gx.F32(), float32(g))
	}
	return []*tensor.Tensor{gx}
}

func fill[T float](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}
