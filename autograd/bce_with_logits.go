package autograd

import (
	"fmt"
	"math"
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
	var y *tensor.Tensor
	if reduction == ReductionNone {
		y = tensor.New(x.DType(), x.Shape()...)
	} else {
		y = tensor.New(x.DType())
	}
	if x.DType() == tensor.Float64 {
		bceFwd(y.F64(), x.F64(), t.F64(), reduction)
	} else {
		bceFwd(y.F32(), x.F32(), t.F32(), reduction)
	}
	return FromOp(y, &bceOp{inputs: ins(logits, target), x: logits, t: target, xc: x, tc: t, reduction: reduction})
}

func bceFwd[T float](y, x, t []T, r Reduction) {
	t = t[:len(x)]
	s := 0.0
	for i, v := range x {
		xv := float64(v)
		l := math.Max(xv, 0) - xv*float64(t[i]) + math.Log1p(math.Exp(-math.Abs(xv)))
		if r == ReductionNone {
			y[i] = T(l)
		} else {
			s += l
		}
	}
	switch r {
	case ReductionMean:
		y[0] = T(s / float64(len(x)))
	case ReductionSum:
		y[0] = T(s)
	}
}

type bceOp struct {
	inputs
	x, t      *Variable
	xc, tc    *tensor.Tensor
	reduction Reduction
}

func (o *bceOp) Name() string { return "BCEWithLogits" }
func (o *bceOp) freshGrads()  {}

func (o *bceOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	var gx, gt *tensor.Tensor
	if needs(o.x) {
		gx = tensor.New(o.xc.DType(), o.xc.Shape()...)
		grads[0] = gx
	}
	if needs(o.t) {
		gt = tensor.New(o.xc.DType(), o.xc.Shape()...)
		grads[1] = gt
	}
	if o.xc.DType() == tensor.Float64 {
		bceBwd(opt64(gx), opt64(gt), o.xc.F64(), o.tc.F64(), gy.F64(), o.reduction)
	} else {
		bceBwd(opt32(gx), opt32(gt), o.xc.F32(), o.tc.F32(), gy.F32(), o.reduction)
	}
	return grads
}

func bceBwd[T float](gx, gt, x, t, gy []T, r Reduction) {
	n := len(x)
	for i, v := range x {
		var g T
		switch r {
		case ReductionNone:
			g = gy[i]
		case ReductionSum:
			g = gy[0]
		default:
			g = gy[0] / T(n)
		}
		if gx != nil {
			gx[i] = T(1/(1+math.Exp(-float64(v))))*g - t[i]*g
		}
		if gt != nil {
			gt[i] = -v * g
		}
	}
}

// opt32 returns t's float32 data, or nil for a nil tensor.
func opt32(t *tensor.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.F32()
}

// opt64 returns t's float64 data, or nil for a nil tensor.
func opt64(t *tensor.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return t.F64()
}
