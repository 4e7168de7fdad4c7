package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

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

func (o *powOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	a, b := o.in(0), o.in(1)
	grads := make([]*tensor.Tensor, 2)
	if needs(a) {
		// b * a**(b-1) * gy
		g := tensor.Mul(gy, tensor.Mul(b.Value, tensor.Pow(a.Value, tensor.AddScalar(b.Value, -1))))
		grads[0] = g
	}
	if needs(b) {
		la := tensor.Log(a.Value).Contiguous()
		if la.DType() == tensor.Float64 {
			zeroInf(la.F64())
		} else {
			zeroInf(la.F32())
		}
		grads[1] = tensor.Mul(tensor.Mul(gy, o.y), la)
	}
	return grads
}

// zeroInf replaces log(0) = -Inf by 0 (the masked case of d(a**b)/db).
func zeroInf[T float](d []T) {
	for i, v := range d {
		if math.IsInf(float64(v), -1) {
			d[i] = 0
		}
	}
}
