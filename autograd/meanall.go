package autograd

import "goddp/tensor"

// MeanAll returns the mean of every element of a as a 0-d tensor (torch's
// a.mean()). It accumulates in float64 in SumAll's order.
func MeanAll(a *Variable) *Variable {
	if !a.Value.IsCPU() {
		return sumAllDevice(a, 1/float64(max(a.Value.Numel(), 1)), "MeanAll")
	}
	n := a.Value.Numel()
	y := tensor.New(a.Value.DType())
	s := tensor.SumAll(a.Value) // SumAll's order
	if y.DType() == tensor.Float64 {
		y.F64()[0] = s / float64(n)
	} else {
		y.F32()[0] = float32(s / float64(n))
	}
	return FromOp(y, &sumAllOp{inputs: ins(a), scale: 1 / float64(n), name: "MeanAll"})
}
