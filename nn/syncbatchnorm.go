package nn

import (
	"context"
	"fmt"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// SyncBatchNorm is BatchNorm whose training statistics cover the whole
// distributed batch (torch's nn.SyncBatchNorm): each forward all-reduces the
// per-channel sum, sum of squares and count over PG, and backward all-reduces
// the per-channel gradient sums, so every rank normalizes with the same mean
// and variance, those of the concatenated batch. In eval mode, or in a group
// of one, it is plain BatchNorm. It accepts [N, C, *] inputs and has
// BatchNorm1d's fields, defaults and state dict keys.
//
// Every rank must run the same forwards and backwards in the same order, as
// with any collective. Timeout bounds each all-reduce (default
// comm.DefaultTimeout); a failed one panics with the error, since Forward and
// backward have no error result (torch raises).
type SyncBatchNorm struct {
	mode
	Weight            *autograd.Variable
	Bias              *autograd.Variable
	RunningMean       *tensor.Tensor
	RunningVar        *tensor.Tensor
	NumBatchesTracked *tensor.Tensor
	Eps               float64
	Momentum          float64
	CumulativeAverage bool
	PG                backend.ProcessGroup
	Timeout           time.Duration
}

// NewSyncBatchNorm returns a float32 SyncBatchNorm over c channels that
// synchronizes over pg, with torch's defaults (eps 1e-5, momentum 0.1).
func NewSyncBatchNorm(c int, pg backend.ProcessGroup) *SyncBatchNorm {
	b := NewBatchNorm1d(c)
	return &SyncBatchNorm{Weight: b.Weight, Bias: b.Bias, RunningMean: b.RunningMean, RunningVar: b.RunningVar,
		NumBatchesTracked: b.NumBatchesTracked, Eps: b.Eps, Momentum: b.Momentum, PG: pg, Timeout: backend.DefaultTimeout}
}

// NamedParameters implements Module: "weight", "bias".
func (b *SyncBatchNorm) NamedParameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: b.Weight}, {Name: "bias", Param: b.Bias}}
}

// NamedBuffers implements Module: "running_mean", "running_var", "num_batches_tracked".
func (b *SyncBatchNorm) NamedBuffers() []NamedBuffer {
	return []NamedBuffer{
		{Name: "running_mean", Buffer: b.RunningMean},
		{Name: "running_var", Buffer: b.RunningVar},
		{Name: "num_batches_tracked", Buffer: b.NumBatchesTracked},
	}
}

// Forward implements Layer.
func (b *SyncBatchNorm) Forward(x *autograd.Variable) *autograd.Variable {
	training := b.Training()
	momentum := trackBatch(training, b.NumBatchesTracked, b.Momentum, b.CumulativeAverage)
	if !training || b.PG == nil || b.PG.Size() == 1 {
		return autograd.BatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, training, momentum, b.Eps)
	}
	return autograd.SyncBatchNorm(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, momentum, b.Eps, b.allReduce)
}

func (b *SyncBatchNorm) allReduce(buf []float64) error {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = backend.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := b.PG.AllReduce(backend.Float64s(buf), backend.Sum).Wait(ctx); err != nil {
		return fmt.Errorf("nn: SyncBatchNorm on rank %d of %d: %w", b.PG.Rank(), b.PG.Size(), err)
	}
	return nil
}

// containerOf is implemented by *Container and so by every struct that
// embeds one.
type containerOf interface{ container() *Container }

func (c *Container) container() *Container { return c }

// ConvertSyncBatchNorm replaces every BatchNorm1d and BatchNorm2d inside m
// with a SyncBatchNorm over pg that shares its parameters, buffers and
// settings (torch's SyncBatchNorm.convert_sync_batchnorm), in place, and
// returns m with its own type, so that the result goes straight to
// ddp.Wrap:
//
//	model := nn.ConvertSyncBatchNorm(nn.NewSequential(...), pg) // *nn.Sequential
//	net, err := ddp.Wrap(ctx, model, pg)
//
// It walks Sequential and Container children recursively. A BatchNorm
// passed as m itself has no parent whose child could be replaced, and its
// type cannot hold a SyncBatchNorm: convert it with SyncBatchNormFrom
// (ConvertSyncBatchNorm panics naming that). A custom module's Forward
// that calls a BatchNorm through its own struct field rather than through
// its registered children keeps calling the old layer: assign the field
// from NamedChildren after converting.
func ConvertSyncBatchNorm[M Module](m M, pg backend.ProcessGroup) M {
	switch any(m).(type) {
	case *BatchNorm1d, *BatchNorm2d:
		panic(fmt.Sprintf("nn: ConvertSyncBatchNorm of a %T: a BatchNorm itself cannot become a SyncBatchNorm in place; use SyncBatchNormFrom", m))
	}
	convertSync(m, pg)
	return m
}

// SyncBatchNormFrom returns a SyncBatchNorm over pg that shares bn's
// parameters, buffers and settings; bn is a *BatchNorm1d or *BatchNorm2d
// (anything else panics, naming its type).
func SyncBatchNormFrom(bn Module, pg backend.ProcessGroup) *SyncBatchNorm {
	s, ok := convertSync(bn, pg).(*SyncBatchNorm)
	if !ok {
		panic(fmt.Sprintf("nn: SyncBatchNormFrom of a %T, not a BatchNorm1d or BatchNorm2d", bn))
	}
	return s
}

// convertSync is ConvertSyncBatchNorm over any Module: a BatchNorm yields
// its SyncBatchNorm, anything else is converted in place and returned.
func convertSync(m Module, pg backend.ProcessGroup) Module {
	switch b := m.(type) {
	case *BatchNorm1d:
		return &SyncBatchNorm{mode: b.mode, Weight: b.Weight, Bias: b.Bias, RunningMean: b.RunningMean, RunningVar: b.RunningVar,
			NumBatchesTracked: b.NumBatchesTracked, Eps: b.Eps, Momentum: b.Momentum, CumulativeAverage: b.CumulativeAverage,
			PG: pg, Timeout: backend.DefaultTimeout}
	case *BatchNorm2d:
		return &SyncBatchNorm{mode: b.mode, Weight: b.Weight, Bias: b.Bias, RunningMean: b.RunningMean, RunningVar: b.RunningVar,
			NumBatchesTracked: b.NumBatchesTracked, Eps: b.Eps, Momentum: b.Momentum, CumulativeAverage: b.CumulativeAverage,
			PG: pg, Timeout: backend.DefaultTimeout}
	case *Sequential:
		for i, l := range b.layers {
			nl, ok := convertSync(l, pg).(Layer)
			if !ok {
				panic(fmt.Sprintf("nn: ConvertSyncBatchNorm: layer %d became a non-Layer %T", i, nl))
			}
			b.layers[i] = nl
			b.children[i].Module = nl
		}
		return b
	case containerOf:
		c := b.container()
		for i := range c.children {
			c.children[i].Module = convertSync(c.children[i].Module, pg)
		}
		return m
	}
	return m
}
