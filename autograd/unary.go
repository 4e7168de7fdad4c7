package autograd

import "github.com/goddp/goddp/tensor"

// The elementwise functions with a gradient are one op: each is a
// tensor.UnaryFn, whose forward and backward are entries of every device's
// op table (the CPU's included), so the op below only records what the
// backward needs, on the op's device, and never reads its elements.

// Exp returns e**a elementwise; its gradient is gy * e**a.
func Exp(a *Variable) *Variable { return unary(tensor.FnExp, a) }

// Log returns the natural logarithm of a; its gradient is gy / a.
func Log(a *Variable) *Variable { return unary(tensor.FnLog, a) }

// Sqrt returns the square root of a; its gradient is gy / (2 sqrt(a)).
func Sqrt(a *Variable) *Variable { return unary(tensor.FnSqrt, a) }

// Tanh returns the hyperbolic tangent of a; its gradient is gy * (1 - y²).
// Float32 on the host runs the branch-free kernel tensor.TanhF32 (within
// about one ulp); float64 keeps math.*, since it serves the gradient checks.
func Tanh(a *Variable) *Variable { return unary(tensor.FnTanh, a) }

// Sigmoid returns 1 / (1 + e**-a); its gradient is gy * y * (1 - y).
// Float32 on the host runs the branch-free kernel tensor.SigmoidF32.
func Sigmoid(a *Variable) *Variable { return unary(tensor.FnSigmoid, a) }

// ReLU returns max(a, 0) elementwise. Its gradient at 0 is 0, as in torch.
func ReLU(a *Variable) *Variable { return unary(tensor.FnReLU, a) }

// GELU returns the exact (erf) Gaussian error linear unit x * Φ(x), torch's
// default; its gradient is gy * (Φ(x) + x φ(x)). A float32 GELU on the
// host whose input needs a gradient keeps the derivative (the CPU table's
// GELUWithGrad), one more activation-sized tensor until the graph is
// freed, so that the backward is one product rather than a second
// evaluation, which cost twice the forward.
func GELU(a *Variable) *Variable { return unary(tensor.FnGELU, a) }

// Neg returns -a.
func Neg(a *Variable) *Variable { return unary(tensor.FnNeg, a) }

func unary(fn tensor.UnaryFn, a *Variable) *Variable {
	y, s := tensor.UnaryForward(fn, a.Value, a.RequiresGrad())
	return FromOp(y, &unaryOp{in: [1]*Variable{a}, saved: s})
}

// unaryOp is an elementwise function: saved holds what its backward reads
// (its output, its input or a derivative) and which function it was. It
// holds its one input itself rather than in inputs, so that the op takes
// 24 bytes, a third of the op structs it replaced.
type unaryOp struct {
	in    [1]*Variable
	saved tensor.UnarySaved
}

// Inputs implements Op.
func (o *unaryOp) Inputs() []*Variable { return o.in[:] }

func (o *unaryOp) Name() string { return o.saved.Fn().String() }
func (o *unaryOp) freshGrads()  {}

// savedTensors gives a derivative the forward made (GELU's) back to the
// cache with the graph (FreeGraph); left to the garbage collector, a
// step's derivatives raised a GPT's peak memory by half.
func (o *unaryOp) savedTensors() []*tensor.Tensor {
	if d := o.saved.Scratch(); d != nil {
		return []*tensor.Tensor{d}
	}
	return nil
}

func (o *unaryOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.UnaryBackward(o.saved, gy, false)}
}

// backwardInPlace writes the gradient over an owned gy.
func (o *unaryOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.UnaryBackward(o.saved, gy, true)}
}
