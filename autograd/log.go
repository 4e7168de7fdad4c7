package autograd

import "github.com/goddp/goddp/tensor"

// Log returns the natural logarithm of a; its gradient is gy / a.
func Log(a *Variable) *Variable {
	return FromOp(tensor.Log(a.Value), &logOp{inputs: ins(a), x: a.Value.Contiguous()})
}

type logOp struct {
	inputs
	x *tensor.Tensor
}

func (o *logOp) Name() string { return "Log" }
func (o *logOp) freshGrads()  {}

func (o *logOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *logOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *logOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.UnaryGradDevice("Log", gy, o.x); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { divKernel(gx, gy, o.x.F32(), 1) },
		func(gx, gy []float64) { divKernel(gx, gy, o.x.F64(), 1) })
}

// divKernel writes gx = gy / (c * s).
func divKernel[T float](gx, gy, s []T, c T) {
	gy, s = gy[:len(gx)], s[:len(gx)]
	for i, g := range gy {
		gx[i] = g / (c * s[i])
	}
}
