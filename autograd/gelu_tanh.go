package autograd

import "github.com/goddp/goddp/tensor"

// GELUTanh returns GELU's tanh approximation ½a(1 + tanh(√(2/π)(a +
// 0.044715a³))), GPT-2's activation: torch's F.gelu(a,
// approximate='tanh') and HF's "gelu_new" (GELU is the exact erf form,
// torch's default). It runs the GELUTanh entries of a's device table. An
// input that needs a gradient keeps the derivative where the device
// computes it with the value (the host's float32, the GPU's), one
// activation-sized tensor until the graph is freed, so that the backward
// is one product; elsewhere (float64, for the gradient checks) it keeps a
// and the backward evaluates the derivative. At ±Inf it gives the limits
// (+Inf, -0; gradient 1, -0) where torch's float32 formula gives NaN.
func GELUTanh(a *Variable) *Variable {
	if !a.RequiresGrad() {
		return FromOp(tensor.GELUTanh(a.Value), &geluTanhOp{in: [1]*Variable{a}})
	}
	y, d := tensor.GELUTanhWithGrad(a.Value)
	o := &geluTanhOp{in: [1]*Variable{a}, deriv: d}
	if d == nil {
		o.x = a.Value
	}
	return FromOp(y, o)
}

// geluTanhOp keeps the derivative (deriv, its own) or the input (x,
// someone else's value) for its backward.
type geluTanhOp struct {
	in    [1]*Variable
	deriv *tensor.Tensor
	x     *tensor.Tensor
}

func (o *geluTanhOp) Name() string        { return "GELUTanh" }
func (o *geluTanhOp) Inputs() []*Variable { return o.in[:] }

// freshGrads: Backward's gradient is a new tensor, BackwardFreeing's the
// derivative's block, which nothing else reads then.
func (o *geluTanhOp) freshGrads() {}

// savedTensors gives the derivative back to the cache with the graph
// (nil once BackwardFreeing made it the gradient).
func (o *geluTanhOp) savedTensors() []*tensor.Tensor {
	if o.deriv == nil {
		return nil
	}
	return []*tensor.Tensor{o.deriv}
}

// Backward returns gy·GELUTanh'(x) in a new tensor, keeping what it
// saved for another backward through the graph.
func (o *geluTanhOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	switch {
	case o.deriv != nil:
		return []*tensor.Tensor{tensor.GELUTanhGradFromDeriv(nil, gy, o.deriv)}
	case o.x != nil:
		return []*tensor.Tensor{tensor.GELUTanhBackward(gy, o.x)}
	}
	panic(errGELUTanhTwice)
}

// BackwardFreeing writes the gradient over the saved derivative (d ←
// gy·d) and hands that tensor back, so the backward allocates nothing: the
// graph is being freed (BackwardAndFree), so nothing reads the derivative
// again. At GPT-2 124M, T=1024, batch 2 that is 12 tensors of B·T·4C
// floats (302 MB) a step. A later backward panics, as torch's does
// through a freed graph.
func (o *geluTanhOp) BackwardFreeing(gy *tensor.Tensor, _ []*tensor.Tensor) []*tensor.Tensor {
	if o.deriv == nil {
		return o.Backward(gy)
	}
	gx := tensor.GELUTanhGradFromDeriv(o.deriv, gy, o.deriv)
	o.deriv = nil
	return []*tensor.Tensor{gx}
}

const errGELUTanhTwice = "autograd: GELUTanh: backward through the same graph a second time: its saved derivative became the first backward's gradient; run the forward again"
