package autograd

import "github.com/goddp/goddp/tensor"

// Mul returns a * b elementwise with broadcasting.
func Mul(a, b *Variable) *Variable {
	return FromOp(tensor.Mul(a.Value, b.Value), &mulOp{ins(a, b)})
}

type mulOp struct{ inputs }

func (o *mulOp) Name() string    { return "Mul" }
func (o *mulOp) freshGrads()     {}
func (o *mulOp) broadcastGrads() {}

func (o *mulOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	a, b := o.in(0), o.in(1)
	grads := make([]*tensor.Tensor, 2)
	if needs(a) {
		grads[0] = mulGrad(gy, b.Value)
	}
	if needs(b) {
		grads[1] = mulGrad(gy, a.Value)
	}
	return grads
}

// mulGrad returns gy * other. When gy is a broadcast of one value (SumAll's
// gradient) and other has one element, every product is the same: it
// returns that product expanded to the output's shape, bit for bit what
// tensor.Mul would fill in.
func mulGrad(gy, other *tensor.Tensor) *tensor.Tensor {
	if other.Numel() != 1 || gy.Numel() <= 1 || !isConstantView(gy) {
		return tensor.Mul(gy, other)
	}
	one := gy
	for d, n := range gy.Shape() {
		if n > 1 {
			one = tensor.Narrow(one, d, 0, 1)
		}
	}
	p := tensor.Mul(one, other) // one product; shape broadcast(ones, other's)
	shape := gy.Shape()
	if r := p.Dim(); r > len(shape) {
		shape = append(make([]int, r-len(shape)), shape...)
		for i := range r - len(gy.Shape()) {
			shape[i] = 1
		}
	}
	return tensor.Expand(p, shape...)
}

// isConstantView reports whether every element of t is one storage element
// (strides 0 along every dimension longer than 1).
func isConstantView(t *tensor.Tensor) bool {
	st := t.Strides()
	for i, d := range t.Shape() {
		if d > 1 && st[i] != 0 {
			return false
		}
	}
	return true
}
