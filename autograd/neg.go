package autograd

import "github.com/goddp/goddp/tensor"

// Neg returns -a.
func Neg(a *Variable) *Variable {
	return FromOp(tensor.Neg(a.Value), &negOp{ins(a)})
}

type negOp struct{ inputs }

func (o *negOp) Name() string { return "Neg" }
func (o *negOp) freshGrads()  {}

func (o *negOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *negOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *negOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if inPlace && gy.IsContiguous() {
		tensor.ScaleInto(gy, -1)
		return []*tensor.Tensor{gy}
	}
	return []*tensor.Tensor{tensor.Neg(gy)}
}
