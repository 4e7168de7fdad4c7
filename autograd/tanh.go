package autograd

import "github.com/goddp/goddp/tensor"

// Tanh returns the hyperbolic tangent of a; its gradient is gy * (1 - y²).
// Float32 runs the branch-free kernel tensor.TanhF32 (within about one ulp);
// float64 keeps math.*, since it serves the gradient checks.
func Tanh(a *Variable) *Variable {
	var y *tensor.Tensor
	if x := a.Value.Contiguous(); x.DType() == tensor.Float32 {
		y = tensor.New(tensor.Float32, x.Shape()...)
		tensor.TanhF32(y.F32(), x.F32())
	} else {
		y = tensor.Tanh(x)
	}
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
