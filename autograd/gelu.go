package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

// GELU returns the exact (erf) Gaussian error linear unit x * Φ(x), torch's
// default; its gradient is gy * (Φ(x) + x φ(x)). Float32 runs the
// branch-free kernels of tensor's fastmath (within about one ulp, several
// times faster than math.Erf); float64 keeps math.Erf, since it serves the
// finite-difference gradient checks.
//
// A float32 GELU whose input needs a gradient keeps the derivative
// (tensor.GELUWithGradF32), one more activation-sized tensor until the
// graph is freed: the forward evaluates Φ and φ anyway, and the backward
// is then one product rather than a second evaluation, which cost twice
// the forward.
func GELU(a *Variable) *Variable {
	x := a.Value.Contiguous()
	if y := tensor.GELUDevice(x); y != nil {
		return FromOp(y, &geluOp{inputs: ins(a), x: x})
	}
	if x.DType() != tensor.Float32 {
		return FromOp(tensor.GELU(x), &geluOp{inputs: ins(a), x: x})
	}
	y := tensor.Empty(tensor.Float32, x.Shape()...) // written whole
	if !a.RequiresGrad() {
		tensor.GELUF32(y.F32(), x.F32())
		return FromOp(y, &geluOp{inputs: ins(a)})
	}
	d := tensor.Empty(tensor.Float32, x.Shape()...)
	tensor.GELUWithGradF32(y.F32(), d.F32(), x.F32())
	return FromOp(y, &geluOp{inputs: ins(a), deriv: d})
}

type geluOp struct {
	inputs
	x     *tensor.Tensor // the input (device and float64 GELUs)
	deriv *tensor.Tensor // GELU'(x) (host float32 GELUs)
}

func (o *geluOp) Name() string { return "GELU" }
func (o *geluOp) freshGrads()  {}

// savedTensors gives the derivative back to the cache with the graph
// (FreeGraph); left to the garbage collector, a step's derivatives raised
// a GPT's peak memory by half.
func (o *geluOp) savedTensors() []*tensor.Tensor {
	if o.deriv == nil {
		return nil
	}
	return []*tensor.Tensor{o.deriv}
}

func (o *geluOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *geluOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *geluOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if o.deriv != nil {
		return unaryGrad(gy, inPlace,
			func(gx, gy []float32) { tensor.GELUBackwardF32(gx, gy, o.deriv.F32()) },
			func(gx, gy []float64) { // a float64 gradient reaching a float32 GELU
				for i, d := range o.deriv.F32()[:len(gx)] {
					gx[i] = gy[i] * float64(d)
				}
			})
	}
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
