package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// BCEWithLogits returns the binary cross-entropy of sigmoid(logits) against
// target in the numerically stable form torch uses,
// max(x, 0) - x*t + log(1 + exp(-|x|)), reduced as asked. logits and target
// must have the same shape; target may require grad (its gradient is -x).
func BCEWithLogits(logits, target *Variable, reduction Reduction) *Variable {
	reduction.check("BCEWithLogits")
	if !slices.Equal(logits.Value.Shape(), target.Value.Shape()) {
		panic(fmt.Sprintf("autograd: BCEWithLogits: logits shape %v does not match target shape %v", logits.Value.Shape(), target.Value.Shape()))
	}
	sameDType("BCEWithLogits", logits.Value, target.Value)
	x, t := logits.Value.Contiguous(), target.Value.Contiguous()
	reduce, div := bceDivisor(reduction, x.Numel())
	y := tensor.BCEWithLogits(x, t, reduce, div)
	return FromOp(y, &bceOp{inputs: ins(logits, target), xc: x, tc: t, reduce: reduce, div: div})
}

// bceDivisor is how a reduction turns the elementwise losses into the
// result: summed (and divided by n for a mean) or not.
func bceDivisor(r Reduction, n int) (reduce bool, div float64) {
	switch r {
	case ReductionNone:
		return false, 1
	case ReductionSum:
		return true, 1
	}
	return true, float64(n)
}

type bceOp struct {
	inputs
	xc, tc *tensor.Tensor // logits and targets, contiguous, on the op's device
	reduce bool
	div    float64
}

func (o *bceOp) Name() string { return "BCEWithLogits" }
func (o *bceOp) freshGrads()  {}

func (o *bceOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gx, gt := tensor.BCEWithLogitsBackward(gy, o.xc, o.tc, o.reduce, o.div, needs(o.in(0)), needs(o.in(1)))
	return []*tensor.Tensor{gx, gt}
}
