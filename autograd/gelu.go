package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

// GELU returns the exact (erf) Gaussian error linear unit x * Φ(x), torch's
// default; its gradient is gy * (Φ(x) + x φ(x)). Float32 runs the
// branch-free kernel tensor.GELUWithGradF32 (within about one ulp, several
// times faster than math.Erf), which also forms the gradient's factor for
// backward; float64 keeps math.Erf, since it serves the finite-difference
// gradient checks.
func GELU(a *Variable) *Variable {
	x := a.Value.Contiguous()
	if y := tensor.GELUDevice(x); y != nil {
		return FromOp(y, &geluOp{inputs: ins(a), x: x})
	}
	if x.DType() == tensor.Float32 {
		// The gradient Φ(x) + xφ(x) is formed with the output, from the same
		// Φ and exponential, and kept for backward instead of x: evaluating
		// them again in backward cost as much as the forward did (in a
		// transformer, as much as 6% of a step), while keeping one tensor
		// of x's size costs what keeping x did.
		y := tensor.Empty(tensor.Float32, x.Shape()...) // written whole
		d := tensor.Empty(tensor.Float32, x.Shape()...)
		tensor.GELUWithGradF32(y.F32(), d.F32(), x.F32())
		return FromOp(y, &geluOp{inputs: ins(a), dydx: d})
	}
	return FromOp(tensor.GELU(x), &geluOp{inputs: ins(a), x: x})
}

type geluOp struct {
	inputs
	x    *tensor.Tensor // the input (device and float64), for backward
	dydx *tensor.Tensor // or GELU'(x), made by the forward (host float32)
}

// savedTensors lets FreeGraph recycle dydx, which the op made.
func (o *geluOp) savedTensors() []*tensor.Tensor {
	if o.dydx == nil {
		return nil
	}
	return []*tensor.Tensor{o.dydx}
}

func (o *geluOp) Name() string { return "GELU" }
func (o *geluOp) freshGrads()  {}

func (o *geluOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *geluOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *geluOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if o.dydx != nil {
		return unaryGrad(gy, inPlace, func(gx, gy []float32) { mulInto(gx, gy, o.dydx.F32()) }, nil)
	}
	if gx := tensor.GELUBackwardDevice(gy, o.x); gx != nil {
		return []*tensor.Tensor{gx}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { tensor.GELUGradF32(gx, gy, o.x.F32()) },
		func(gx, gy []float64) { geluBwd64(gx, gy, o.x.F64()) })
}

// mulInto sets dst[i] = a[i]·b[i]; dst may alias a.
func mulInto(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
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
