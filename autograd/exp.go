package autograd

import "github.com/goddp/goddp/tensor"

// Exp returns e**a elementwise; its gradient is gy * e**a.
func Exp(a *Variable) *Variable {
	y := tensor.Exp(a.Value)
	return FromOp(y, &expOp{inputs: ins(a), y: y})
}

type expOp struct {
	inputs
	y *tensor.Tensor
}

func (o *expOp) Name() string { return "Exp" }
func (o *expOp) freshGrads()  {}

func (o *expOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *expOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *expOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.UnaryGradDevice("Exp", gy, o.y); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { mulKernel(gx, gy, o.y.F32()) },
		func(gx, gy []float64) { mulKernel(gx, gy, o.y.F64()) })
}

// mulKernel writes gx = gy * s.
func mulKernel[T float](gx, gy, s []T) {
	gy, s = gy[:len(gx)], s[:len(gx)]
	for i, g := range gy {
		gx[i] = g * s[i]
	}
}
