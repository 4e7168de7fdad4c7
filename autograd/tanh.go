package autograd

import "github.com/goddp/goddp/tensor"

// Tanh returns the hyperbolic tangent of a; its gradient is gy * (1 - y²).
// Float32 runs the branch-free kernel tensor.TanhF32 (within about one ulp);
// float64 keeps math.*, since it serves the gradient checks.
func Tanh(a *Variable) *Variable {
	y := tensor.Tanh(a.Value)
	return FromOp(y, &tanhOp{inputs: ins(a), y: y})
}

type tanhOp struct {
	inputs
	y *tensor.Tensor
}

func (o *tanhOp) Name() string { return "Tanh" }
func (o *tanhOp) freshGrads()  {}

func (o *tanhOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *tanhOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *tanhOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.UnaryGradDevice("Tanh", gy, o.y); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { tanhBwd(gx, gy, o.y.F32()) },
		func(gx, gy []float64) { tanhBwd(gx, gy, o.y.F64()) })
}

func tanhBwd[T float](gx, gy, y []T) {
	gy, y = gy[:len(gx)], y[:len(gx)]
	for i, g := range gy {
		gx[i] = g * (1 - y[i]*y[i])
	}
}
