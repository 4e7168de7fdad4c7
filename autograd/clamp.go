package autograd

import "github.com/goddp/goddp/tensor"

// Clamp limits a to [lo, hi] elementwise (math.Inf bounds leave a side open).
// The gradient passes where lo <= a <= hi, bounds included, as in torch.
func Clamp(a *Variable, lo, hi float64) *Variable {
	return FromOp(tensor.Clamp(a.Value, lo, hi), &clampOp{inputs: ins(a), x: a.Value.Contiguous(), lo: lo, hi: hi})
}

type clampOp struct {
	inputs
	x      *tensor.Tensor // the input, contiguous, on the op's device
	lo, hi float64
}

func (o *clampOp) Name() string { return "Clamp" }
func (o *clampOp) freshGrads()  {}

func (o *clampOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.ClampBackward(gy, o.x, o.lo, o.hi, false)}
}

// backwardInPlace writes the gradient over an owned gy.
func (o *clampOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.ClampBackward(gy, o.x, o.lo, o.hi, true)}
}
