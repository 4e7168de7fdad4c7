package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
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
	y, saved := tensor.MSELoss(pred.Value, target.Value, tensor.Reduction(reduction))
	return FromOp(y, &mseOp{inputs: ins(pred, target), pred: pred, target: target, saved: saved})
}

type mseOp struct {
	inputs
	pred, target *Variable
	saved        *tensor.MSE
}

func (o *mseOp) Name() string { return "MSELoss" }
func (o *mseOp) freshGrads()  {}

func (o *mseOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gp, gt := o.saved.Backward(gy, needs(o.pred), needs(o.target))
	return []*tensor.Tensor{gp, gt}
}

// negate flips the sign of t's elements in place.
func negate(t *tensor.Tensor) { tensor.ScaleInto(t, -1) }
