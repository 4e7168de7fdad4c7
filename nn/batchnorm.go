package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// BatchNorm1d normalizes each channel of x [N, C] (or [N, C, L]) over the
// batch (torch's nn.BatchNorm1d with affine=True, track_running_stats=True).
// In training it uses the batch statistics and updates the running ones:
// running = (1-momentum)*running + momentum*batch, with the unbiased batch
// variance; in eval mode it uses the running statistics.
//
// RunningMean, RunningVar and NumBatchesTracked are buffers, so they are in
// the state dict ("running_mean", "running_var", "num_batches_tracked").
// NumBatchesTracked is a 0-d int64 tensor, as torch saves it (a state dict
// from an older goddp, where it was float64, loads into it).
type BatchNorm1d struct {
	mode
	Weight            *autograd.Variable // [C], ones at init
	Bias              *autograd.Variable // [C], zeros at init
	RunningMean       *tensor.Tensor     // [C], zeros at init
	RunningVar        *tensor.Tensor     // [C], ones at init
	NumBatchesTracked *tensor.Tensor     // 0-d int64, as torch's
	Eps               float64            // 1e-5
	Momentum          float64            // 0.1
	// CumulativeAverage uses momentum 1/num_batches_tracked, a simple
	// average of all batches (torch's momentum=None).
	CumulativeAverage bool
}

// NewBatchNorm1d returns a float32 BatchNorm1d over c channels with torch's
// defaults (eps 1e-5, momentum 0.1).
func NewBatchNorm1d(c int) *BatchNorm1d {
	if c <= 0 {
		panic(fmt.Sprintf("nn: BatchNorm1d(%d): size must be positive", c))
	}
	w := tensor.New(tensor.Float32, c)
	fill32(w.F32(), 1)
	rv := tensor.New(tensor.Float32, c)
	fill32(rv.F32(), 1)
	return &BatchNorm1d{
		Weight: autograd.Param(w), Bias: autograd.Param(tensor.New(tensor.Float32, c)),
		RunningMean: tensor.New(tensor.Float32, c), RunningVar: rv,
		NumBatchesTracked: tensor.New(tensor.Int64),
		Eps:               1e-5, Momentum: 0.1,
	}
}

// NamedParameters implements Module: "weight", "bias".
func (b *BatchNorm1d) NamedParameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: b.Weight}, {Name: "bias", Param: b.Bias}}
}

// NamedBuffers implements Module: "running_mean", "running_var", "num_batches_tracked".
func (b *BatchNorm1d) NamedBuffers() []NamedBuffer {
	return []NamedBuffer{
		{Name: "running_mean", Buffer: b.RunningMean},
		{Name: "running_var", Buffer: b.RunningVar},
		{Name: "num_batches_tracked", Buffer: b.NumBatchesTracked},
	}
}

// Forward implements Layer.
func (b *BatchNorm1d) Forward(x *autograd.Variable) *autograd.Variable {
	training := b.Training()
	momentum := b.Momentum
	momentum = trackBatch(training, b.NumBatchesTracked, momentum, b.CumulativeAverage)
	return autograd.BatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, training, momentum, b.Eps)
}
