package autograd

import "github.com/goddp/goddp/tensor"

// Pow returns a ** b elementwise with broadcasting. The exponent's gradient
// gy * a**b * log(a) is taken as 0 where a == 0, as torch does.
func Pow(a, b *Variable) *Variable {
	y := tensor.Pow(a.Value, b.Value)
	return FromOp(y, &powOp{inputs: ins(a, b), y: y})
}

type powOp struct {
	inputs
	y *tensor.Tensor
}

func (o *powOp) Name() string { return "Pow" }
func (o *powOp) freshGrads()  {}

// Backward returns both gradients at the output's shape; the engine sums a
// broadcast input's back to its own.
func (o *powOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	a, b := o.in(0), o.in(1)
	ga, gb := tensor.PowBackward(gy, a.Value, b.Value, o.y, needs(a), needs(b))
	return []*tensor.Tensor{ga, gb}
}
