package autograd

import (
	"math"

	"goddp/tensor"
)

// GELU returns the exact (erf) Gaussian error linear unit x * Φ(x), torch's
// default; its gradient is gy * (Φ(x) + x φ(x)).
func GELU(a *Variable) *Variable {
	return FromOp(tensor.GELU(a.Value), &geluOp{inputs: ins(a), x: a.Value.Contiguous()})
}

type geluOp struct {
	inputs
	x *tensor.Tensor
}

func (o *geluOp) Name() string { return "GELU" }
func (o *geluOp) freshGrads()  {}

func (o *geluOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *geluOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *geluOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { geluBwd(gx, gy, o.x.F32()) },
		func(gx, gy []float64) { geluBwd(gx, gy, o.x.F64()) })
}

func geluBwd[T float](gx, gy, x []T) {
	const invSqrt2, invSqrt2Pi = 0.70710678118654752440, 0.39894228040143267794
	gy, x = gy[:len(gx)], x[:len(gx)]
	for i, g := range gy {
		v := float64(x[i])
		cdf := 0.5 * (1 + math.Erf(v*invSqrt2))
		pdf := invSqrt2Pi * math.Exp(-0.5*v*v)
		gx[i] = T(float64(g) * (cdf + v*pdf))
	}
}
