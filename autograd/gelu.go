package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

// GELU returns the exact (erf) Gaussian error linear unit x * Φ(x), torch's
// default; its gradient is gy * (Φ(x) + x φ(x)). Float32 runs the
// branch-free kernels tensor.GELUF32 and tensor.GELUGradF32 (within about
// one ulp, several times faster than math.Erf); float64 keeps math.Erf,
// since it serves the finite-difference gradient checks.
func GELU(a *Variable) *Variable {
	x := a.Value.Contiguous()
	if y := tensor.GELUDevice(x); y != nil {
		return FromOp(y, &geluOp{inputs: ins(a), x: x})
	}
	var y *tensor.Tensor
	if x.DType() == tensor.Float32 {
		y = tensor.Empty(tensor.Float32, x.Shape()...) // written whole
		tensor.GELUF32(y.F32(), x.F32())
	} else {
		y = tensor.GELU(x)
	}
	return FromOp(y, &geluOp{inputs: ins(a), x: x})
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
	if gx := tensor.GELUBackwardDevice(gy, o.x); gx != nil {
		return []*tensor.Tensor{gx}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { tensor.GELUGradF32(gx, gy, o.x.F32()) },
		func(gx, gy []float64) { geluBwd64(gx, gy, o.x.F64()) })
}

func geluBwd64(gx, gy, x []float64) {
	const invSqrt2, invSqrt2Pi = 0.70710678118654752440, 0.39894228040143267794
	gy, x = gy[:len(gx)], x[:len(gx)]
	for i, g := range gy {
		v := x[i]
		cdf := 0.5 * (1 + math.Erf(v*invSqrt2))
		pdf := invSqrt2Pi * math.Exp(-0.5*v*v)
		gx[i] = g * (cdf + v*pdf)
	}
}
