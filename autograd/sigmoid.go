package autograd

import "github.com/goddp/goddp/tensor"

// Sigmoid returns 1 / (1 + e**-a); its gradient is gy * y * (1 - y).
// Float32 runs the branch-free kernel tensor.SigmoidF32 (within about one ulp);
// float64 keeps math.*, since it serves the gradient checks.
func Sigmoid(a *Variable) *Variable {
	y := tensor.Sigmoid(a.Value)
	return FromOp(y, &sigmoidOp{inputs: ins(a), y: y})
}

type sigmoidOp struct {
	inputs
	y *tensor.Tensor
}

func (o *sigmoidOp) Name() string { return "Sigmoid" }
func (o *sigmoidOp) freshGrads()  {}

func (o *sigmoidOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *sigmoidOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *sigmoidOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if g := tensor.UnaryGradDevice("Sigmoid", gy, o.y); g != nil {
		return []*tensor.Tensor{g}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { sigmoidBwd(gx, gy, o.y.F32()) },
		func(gx, gy []float64) { sigmoidBwd(gx, gy, o.y.F64()) })
}

func sigmoidBwd[T float](gx, gy, y []T) {
	gy, y = gy[:len(gx)], y[:len(gx)]
	for i, g := range gy {
		gx[i] = g * y[i] * (1 - y[i])
	}
}
