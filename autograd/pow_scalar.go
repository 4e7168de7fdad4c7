package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

// PowScalar returns a ** p elementwise; its gradient is gy * p * a**(p-1).
func PowScalar(a *Variable, p float64) *Variable {
	return FromOp(tensor.PowScalar(a.Value, p), &powScalarOp{inputs: ins(a), x: a.Value.Contiguous(), p: p})
}

type powScalarOp struct {
	inputs
	x *tensor.Tensor
	p float64
}

func (o *powScalarOp) Name() string { return "PowScalar" }
func (o *powScalarOp) freshGrads()  {}

func (o *powScalarOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *powScalarOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *powScalarOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { powScalarKernel(gx, gy, o.x.F32(), o.p) },
		func(gx, gy []float64) { powScalarKernel(gx, gy, o.x.F64(), o.p) })
}

func powScalarKernel[T float](gx, gy, x []T, p float64) {
	gy, x = gy[:len(gx)], x[:len(gx)]
	switch p {
	case 0:
		clear(gx)
	case 1:
		copy(gx, gy)
	case 2:
		for i, g := range gy {
			gx[i] = 2 * g * x[i]
		}
	default:
		for i, g := range gy {
			gx[i] = T(float64(g) * p * math.Pow(float64(x[i]), p-1))
		}
	}
}
