package autograd

import (
	"fmt"
	"slices"

	"goddp/tensor"
)

// MSELoss returns the squared error (pred - target)² reduced as asked, like
// torch.nn.functional.mse_loss. pred and target must have the same shape;
// target may require grad too.
func MSELoss(pred, target *Variable, reduction Reduction) *Variable {
	reduction.check("MSELoss")
	if !slices.Equal(pred.Value.Shape(), target.Value.Shape()) {
		panic(fmt.Sprintf("autograd: MSELoss: pred shape %v does not match target shape %v", pred.Value.Shape(), target.Value.Shape()))
	}
	sameDType("MSELoss", pred.Value, target.Value)
	if !pred.Value.IsCPU() || !target.Value.IsCPU() {
		return mseDevice(pred, target, reduction)
	}
	p, t := pred.Value.Contiguous(), target.Value.Contiguous()
	d := tensor.New(p.DType(), p.Shape()...)
	var y *tensor.Tensor
	if reduction == ReductionNone {
		y = tensor.New(p.DType(), p.Shape()...)
	} else {
		y = tensor.New(p.DType())
	}
	if p.DType() == tensor.Float64 {
		mseFwd(y.F64(), d.F64(), p.F64(), t.F64(), reduction)
	} else {
		mseFwd(y.F32(), d.F32(), p.F32(), t.F32(), reduction)
	}
	return FromOp(y, &mseOp{inputs: ins(pred, target), pred: pred, target: target, d: d, reduction: reduction})
}

func mseFwd[T float](y, d, p, t []T, r Reduction) {
	t = t[:len(p)]
	d = d[:len(p)]
	s := 0.0
	for i, v := range p {
		e := v - t[i]
		d[i] = e
		if r == ReductionNone {
			y[i] = e * e
		} else {
			s += float64(e) * float64(e)
		}
	}
	switch r {
	case ReductionMean:
		y[0] = T(s / float64(len(p)))
	case ReductionSum:
		y[0] = T(s)
	}
}

type mseOp struct {
	inputs
	pred, target *Variable
	d            *tensor.Tensor // pred - target
	reduction    Reduction
}

func (o *mseOp) Name() string { return "MSELoss" }
func (o *mseOp) freshGrads()  {}

func (o *mseOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	gp := tensor.New(o.d.DType(), o.d.Shape()...)
	if gp.DType() == tensor.Float64 {
		mseBwd(gp.F64(), o.d.F64(), gy.F64(), o.reduction)
	} else {
		mseBwd(gp.F32(), o.d.F32(), gy.F32(), o.reduction)
	}
	if needs(o.pred) {
		grads[0] = gp
	}
	if needs(o.target) {
		gt := gp
		if needs(o.pred) {
			gt = gp.Clone()
		}
		negate(gt)
		grads[1] = gt
	}
	return grads
}

func mseBwd[T float](gp, d, gy []T, r Reduction) {
	n := len(d)
	g := T(2)
	if r != ReductionNone {
		g *= gy[0]
		if r == ReductionMean {
			g /= T(n)
		}
	}
	for i, v := range d {
		if r == ReductionNone {
			gp[i] = 2 * gy[i] * v
		} else {
			gp[i] = g * v
		}
	}
}

// negate flips the sign of t's elements in place.
func negate(t *tensor.Tensor) {
	if t.DType() == tensor.Float64 {
		for i, v := range t.F64() {
			t.F64()[i] = -v
		}
		return
	}
	d := t.F32()
	for i, v := range d {
		d[i] = -v
	}
}
