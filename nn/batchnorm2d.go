package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// BatchNorm2d normalizes each channel of x [N, C, H, W] over the batch and
// the spatial positions (torch's nn.BatchNorm2d with affine=True,
// track_running_stats=True), with the same fields, state dict keys and
// defaults as BatchNorm1d.
type BatchNorm2d struct {
	mode
	Weight            *autograd.Variable // [C], ones at init
	Bias              *autograd.Variable // [C], zeros at init
	RunningMean       *tensor.Tensor     // [C], zeros at init
	RunningVar        *tensor.Tensor     // [C], ones at init
	NumBatchesTracked *tensor.Tensor     // 0-d int64, as torch's
	Eps               float64            // 1e-5
	Momentum          float64            // 0.1
	// CumulativeAverage is torch's momentum=None (see BatchNorm1d).
	CumulativeAverage bool
}

// NewBatchNorm2d returns a float32 BatchNorm2d over c channels with torch's
// defaults (eps 1e-5, momentum 0.1).
func NewBatchNorm2d(c int) *BatchNorm2d {
	b := NewBatchNorm1d(c)
	return &BatchNorm2d{Weight: b.Weight, Bias: b.Bias, RunningMean: b.RunningMean, RunningVar: b.RunningVar,
		NumBatchesTracked: b.NumBatchesTracked, Eps: b.Eps, Momentum: b.Momentum}
}

// NamedParameters implements Module: "weight", "bias".
func (b *BatchNorm2d) NamedParameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: b.Weight}, {Name: "bias", Param: b.Bias}}
}

// NamedBuffers implements Module: "running_mean", "running_var", "num_batches_tracked".
func (b *BatchNorm2d) NamedBuffers() []NamedBuffer {
	return []NamedBuffer{
		{Name: "running_mean", Buffer: b.RunningMean},
		{Name: "running_var", Buffer: b.RunningVar},
		{Name: "num_batches_tracked", Buffer: b.NumBatchesTracked},
	}
}

// Forward implements Layer; x must be 4-d, as torch checks.
func (b *BatchNorm2d) Forward(x *autograd.Variable) *autograd.Variable {
	if x.Value.Dim() != 4 {
		panic(fmt.Sprintf("nn: BatchNorm2d: expected 4D input [N, C, H, W], got shape %v", x.Value.Shape()))
	}
	training := b.Training()
	momentum := trackBatch(training, b.NumBatchesTracked, b.Momentum, b.CumulativeAverage)
	return autograd.BatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, training, momentum, b.Eps)
}

// trackBatch counts a training batch in nbt and returns the momentum to use.
func trackBatch(training bool, nbt *tensor.Tensor, momentum float64, cumulative bool) float64 {
	if !training {
		return momentum
	}
	n := nbt.I64()
	n[0]++
	if cumulative {
		return 1 / float64(n[0])
	}
	return momentum
}
