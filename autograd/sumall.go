package autograd

import "github.com/goddp/goddp/tensor"

// SumAll returns the sum of every element of a as a 0-d tensor (torch's
// a.sum()). It accumulates in float64 in tensor.SumAll's fixed order
// (sixteen interleaved partial sums combined pairwise, then the tail),
// which vectorises and runs several times faster than one running sum. The
// result can differ from a strictly sequential float64 sum in the last bits
// of a float64 input; torch's own order (a float32 cascade for float32)
// matches neither.
func SumAll(a *Variable) *Variable {
	return FromOp(tensor.SumAllOf(a.Value), &sumAllOp{inputs: ins(a), scale: 1})
}

// sumAllOp is SumAll's (scale 1) and MeanAll's (scale 1/n) backward: every
// input element receives scale * gy.
type sumAllOp struct {
	inputs
	scale float64
	name  string
}

func (o *sumAllOp) Name() string {
	if o.name != "" {
		return o.name
	}
	return "SumAll"
}
func (o *sumAllOp) freshGrads()     {}
func (o *sumAllOp) broadcastGrads() {}

// Backward returns scale*gy as a new scalar expanded (stride 0) to the
// input's shape: consumers that take broadcast gradients (Mul, Add, a leaf's
// Grad) read it without a tensor of the input's size being filled; the
// engine materialises it for any other op.
func (o *sumAllOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.ExpandScaled(gy, o.scale, o.in(0).Value.Shape()...)}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
