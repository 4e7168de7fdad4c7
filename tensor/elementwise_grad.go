package tensor

import "fmt"

// UnaryFn names an elementwise function with a gradient: the family that
// autograd records as one op (autograd.Unary). Each has a forward and a
// backward entry in every device's Kernels table, the CPU's included.
type UnaryFn uint8

const (
	FnExp UnaryFn = iota
	FnLog
	FnSqrt
	FnTanh
	FnSigmoid
	FnReLU
	FnGELU
	FnNeg
)

var unaryFnNames = [...]string{"Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "ReLU", "GELU", "Neg"}

func (f UnaryFn) String() string {
	if int(f) < len(unaryFnNames) {
		return unaryFnNames[f]
	}
	return fmt.Sprintf("UnaryFn(%d)", uint8(f))
}

// gradRule is how a backward turns gy and the saved tensor into dx.
type gradRule uint8

const (
	ruleMul     gradRule = iota // dx = gy·s (Exp: s = y; GELU: s = its derivative)
	ruleDiv                     // dx = gy/s (Log: s = x)
	ruleSqrt                    // dx = gy/(2y)
	ruleTanh                    // dx = gy·(1-y²)
	ruleSigmoid                 // dx = gy·y·(1-y)
	ruleReLU                    // dx = gy where y > 0
	ruleGELU                    // dx = gy·GELU'(x), from x
	ruleNeg                     // dx = -gy
)

// UnarySaved is what an elementwise op keeps for its backward: a tensor on
// the op's device (its output, its input or a derivative the forward
// computed on the way) and the rule that reads it.
type UnarySaved struct {
	t     *Tensor
	fn    UnaryFn
	rule  gradRule
	owned bool // t is the op's own (a derivative), not a value others hold
}

// Scratch returns the saved tensor when it belongs to the op alone (a
// GELU's derivative), so that freeing the graph can recycle it; nil
// otherwise (the op's output or input, which others hold).
func (s UnarySaved) Scratch() *Tensor {
	if s.owned {
		return s.t
	}
	return nil
}

// table returns the op table of the device every non-nil operand lives on,
// the host's included: the dispatch of the ops converted to the one-table
// seam (doc.go, "Adding an op"). Operands on different devices panic
// naming both.
func table(op string, ts ...*Tensor) *Kernels {
	if k := kernelsFor(op, ts...); k != nil {
		return k
	}
	return &cpuTable
}

// need panics with NoKernel unless the entry exists on t's device.
func need(ok bool, op string, t *Tensor) {
	if !ok {
		panic(NoKernel(op, t.Device()))
	}
}

// UnaryForward returns fn(x) and what its backward needs, by the forward
// entry of x's device table. needGrad false (inference, an input without
// a gradient) skips work done only for the backward (GELU's derivative).
func UnaryForward(fn UnaryFn, x *Tensor, needGrad bool) (*Tensor, UnarySaved) {
	name := fn.String()
	k := table(name, x)
	x = x.Contiguous()
	y := EmptyAs(x, x.shape...) // every entry writes each element
	var kern func(y, x *Tensor)
	var s UnarySaved
	switch fn {
	case FnExp:
		kern, s = k.Exp, UnarySaved{t: y, rule: ruleMul}
	case FnLog:
		kern, s = k.Log, UnarySaved{t: x, rule: ruleDiv}
	case FnSqrt:
		kern, s = k.Sqrt, UnarySaved{t: y, rule: ruleSqrt}
	case FnTanh:
		kern, s = k.Tanh, UnarySaved{t: y, rule: ruleTanh}
	case FnSigmoid:
		kern, s = k.Sigmoid, UnarySaved{t: y, rule: ruleSigmoid}
	case FnReLU:
		kern, s = k.ReLU, UnarySaved{t: y, rule: ruleReLU}
	case FnGELU:
		// A table that keeps the derivative (the CPU's, float32) makes
		// the backward one product instead of a second evaluation of Φ
		// and φ, which cost twice the forward, for one more
		// activation-sized tensor until the graph is freed.
		if needGrad && k.GELUWithGrad != nil && x.dtype == Float32 {
			d := EmptyAs(x, x.shape...)
			k.GELUWithGrad(y, d, x)
			return y, UnarySaved{t: d, fn: fn, rule: ruleMul, owned: true}
		}
		kern, s = k.GELU, UnarySaved{t: x, rule: ruleGELU}
	case FnNeg:
		need(k.Scale != nil, name, x)
		k.Scale(y, x, -1)
		return y, UnarySaved{fn: fn, rule: ruleNeg}
	default:
		panic(fmt.Sprintf("tensor: UnaryForward: unknown function %v", fn))
	}
	need(kern != nil, name, x)
	kern(y, x)
	s.fn = fn
	return y, s
}

// UnaryBackward returns the input gradient of the elementwise op that
// saved s, from its output gradient gy, by the backward entry of gy's
// device table. inPlace (the caller owns gy) writes it over gy.
func UnaryBackward(s UnarySaved, gy *Tensor, inPlace bool) *Tensor {
	g := gy.Contiguous()
	dx := g
	if !inPlace && g == gy {
		dx = EmptyAs(g, g.shape...) // every entry writes each element
	}
	// The op's name is built only for a panic: a concatenation on every
	// call cost an allocation a backward.
	const name = "UnaryBackward"
	if s.rule == ruleNeg {
		k := table(name, g)
		needBackward(k.Scale != nil, s.fn, g)
		k.Scale(dx, g, -1)
		return dx
	}
	k := table(name, g, s.t)
	sv := s.t
	if sv.dtype != g.dtype { // a float64 gradient reaching a float32 op
		sv = AsType(sv, g.dtype)
	}
	var kern func(dx, dy, s *Tensor)
	switch s.rule {
	case ruleMul:
		kern = k.Mul
	case ruleDiv:
		kern = k.Div
	case ruleSqrt:
		kern = k.SqrtBackward
	case ruleTanh:
		kern = k.TanhBackward
	case ruleSigmoid:
		kern = k.SigmoidBackward
	case ruleReLU:
		kern = k.ReLUBackward
	case ruleGELU:
		kern = k.GELUBackward
	}
	needBackward(kern != nil, s.fn, g)
	kern(dx, g, sv)
	return dx
}

// Fn returns the function that saved s.
func (s UnarySaved) Fn() UnaryFn { return s.fn }

// needBackward panics with NoKernel naming fn's backward unless ok.
func needBackward(ok bool, fn UnaryFn, t *Tensor) {
	if !ok {
		panic(NoKernel(fn.String()+" backward", t.Device()))
	}
}
