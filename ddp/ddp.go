package ddp

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// DDP wraps a model for synchronous data-parallel training (torch's
// DistributedDataParallel). Use it from one goroutine, like the model.
type DDP struct {
	model   nn.Layer
	pg      backend.ProcessGroup
	cfg     config
	params  []param
	buffers []*tensor.Tensor

	r        *reducer
	stats    statsRecorder
	timeline *Timeline

	noSync int // depth of NoSync / EnterNoSync
	join   *joinState
	closed bool
}

// Wrap verifies that every rank holds the same model, broadcasts rank 0's
// parameters and buffers, assigns the gradients to buckets and attaches the
// gradient hooks. Every rank of pg must call it. The model's parameters are
// those of NamedParameters that require grad, in registration order.
//
// Wrap runs collectives (the shape check and the broadcast); they end when
// ctx ends or after the Timeout option (default comm.DefaultTimeout),
// whichever comes first.
func Wrap(ctx context.Context, model nn.Layer, pg backend.ProcessGroup, opts ...Option) (*DDP, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if model == nil || pg == nil {
		return nil, fmt.Errorf("%w: Wrap needs a model and a process group", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &DDP{model: model, pg: pg, cfg: cfg}
	if cfg.timelineOn {
		d.timeline = cfg.timeline
		if d.timeline == nil {
			d.timeline = NewTimeline(pg.Rank())
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	state := modelState(model)
	for _, e := range state {
		if e.t == nil {
			return nil, fmt.Errorf("%w: %s %q has no value", ErrInvalidOption, e.kind, e.name)
		}
	}
	if err := verifyModel(ctx, pg, state); err != nil {
		return nil, err
	}
	all := make([]*tensor.Tensor, len(state))
	for i, e := range state {
		all[i] = e.t
	}
	if err := broadcastState(ctx, pg, all, 0, "broadcasting rank 0's parameters and buffers"); err != nil {
		return nil, err
	}

	seen := map[*autograd.Variable]bool{}
	for _, np := range model.NamedParameters() {
		if !np.Param.RequiresGrad() || seen[np.Param] {
			continue // frozen, or shared with an earlier name (tied weights)
		}
		seen[np.Param] = true
		v := np.Param.Value
		d.params = append(d.params, param{name: np.Name, v: np.Param, dtype: v.DType(), numel: v.Numel(),
			shape: append([]int(nil), v.Shape()...)})
	}
	for _, nb := range model.NamedBuffers() {
		d.buffers = append(d.buffers, nb.Buffer)
	}
	if len(d.params) == 0 {
		return nil, fmt.Errorf("%w: the model has no parameter that requires grad", ErrInvalidOption)
	}
	if d.cfg.device == nil {
		dev, err := paramsDevice(d.params)
		if err != nil {
			return nil, err
		}
		if !tensor.IsCPU(dev) {
			// torch's DDP follows the module's device; so does this one.
			if d.cfg.device, err = deviceFor(dev); err != nil {
				return nil, err
			}
		}
	}
	if err := validateDevice(&d.cfg, d.params); err != nil {
		return nil, err
	}
	d.cfg.shared, d.cfg.sharedAlloc = allocSharedBuckets(ctx, pg, &d.cfg, d.params)
	d.r = newReducer(pg, &d.cfg, d.params, &d.stats, d.timeline)
	if err := d.r.buildErr; err != nil {
		d.r.close()
		d.r.releaseShared()
		return nil, err
	}
	return d, nil
}

// Module returns the wrapped model (torch's ddp.module), e.g. for evaluation
// or checkpoints.
func (d *DDP) Module() nn.Layer { return d.model }

// ProcessGroup returns the group DDP communicates over.
func (d *DDP) ProcessGroup() backend.ProcessGroup { return d.pg }

// Parameters returns the synchronised parameters in registration order
// (what to hand to an optimizer).
func (d *DDP) Parameters() []*autograd.Variable {
	out := make([]*autograd.Variable, len(d.params))
	for i, p := range d.params {
		out[i] = p.v
	}
	return out
}

// NamedParameters returns the synchronised parameters with their names.
func (d *DDP) NamedParameters() []nn.NamedParameter {
	out := make([]nn.NamedParameter, len(d.params))
	for i, p := range d.params {
		out[i] = nn.NamedParameter{Name: p.name, Param: p.v}
	}
	return out
}

// Forward runs the model on x. Before the model runs it performs this
// iteration's collectives (the Join all-reduce, the one-time bucket rebuild,
// the buffer broadcast); afterwards, unless inside NoSync, it arms the
// reducer so that the next loss.Backward() all-reduces the gradients and
// returns with them averaged across ranks.
func (d *DDP) Forward(x *autograd.Variable) (*autograd.Variable, error) {
	return d.ForwardFunc(func() *autograd.Variable { return d.model.Forward(x) })
}

// ForwardFunc is Forward for models whose forward is not Layer.Forward (several
// inputs, extra arguments): fn computes the output from d.Module().
func (d *DDP) ForwardFunc(fn func() *autograd.Variable) (*autograd.Variable, error) {
	if d.closed {
		return nil, ErrClosed
	}
	start := time.Now()
	sync := d.noSync == 0
	root, div := 0, float64(d.pg.Size())
	if d.join != nil {
		f, err := d.join.exchange(d, true, sync)
		if err != nil {
			return nil, err
		}
		root = f.authority
		if !d.join.cfg.divideByInitialWorldSize {
			div = float64(f.active)
		}
	}
	if err := d.r.maybeRebuild(root); err != nil {
		return nil, err
	}
	if err := d.syncBuffers(root); err != nil {
		return nil, err
	}
	out := fn()
	if sync {
		d.r.prepare(out, div)
	}
	dur := time.Since(start)
	d.stats.setForward(dur)
	d.timeline.record("forward", "compute", tidCompute, start, dur, nil)
	return out, nil
}

func (d *DDP) syncBuffers(root int) error {
	if !d.cfg.broadcastBuffers || len(d.buffers) == 0 || d.pg.Size() == 1 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout)
	defer cancel()
	return broadcastState(ctx, d.pg, d.buffers, root, fmt.Sprintf("broadcasting buffers from rank %d", root))
}

// NoSync runs fn with gradient synchronisation off (torch's no_sync()):
// backward passes of Forwards called inside fn only accumulate local
// gradients; the first synchronised backward afterwards all-reduces the
// accumulated sum. Use it for gradient accumulation.
func (d *DDP) NoSync(fn func() error) error {
	d.EnterNoSync()
	defer d.ExitNoSync()
	return fn()
}

// EnterNoSync turns synchronisation off until the matching ExitNoSync
// (calls nest).
func (d *DDP) EnterNoSync() { d.noSync++ }

// ExitNoSync undoes one EnterNoSync.
func (d *DDP) ExitNoSync() {
	if d.noSync > 0 {
		d.noSync--
	}
}

// RegisterCommHook replaces the bucket reduction (torch's
// register_comm_hook). Call it on every rank, before the first backward.
func (d *DDP) RegisterCommHook(h CommHook) {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	d.r.setHook(h)
}

// Stats returns the timing statistics.
func (d *DDP) Stats() Stats {
	s := d.stats.snapshot()
	d.r.mu.Lock()
	for _, b := range d.r.buckets {
		s.BucketBytes = append(s.BucketBytes, b.nbytes())
	}
	s.Reduction = d.r.reduction()
	d.r.mu.Unlock()
	return s
}

// ResetStats clears the statistics (e.g. after warm-up).
func (d *DDP) ResetStats() { d.stats.reset() }

// Timeline returns the trace recorder, or nil when WithTimeline was not given
// (a nil *Timeline ignores every call).
func (d *DDP) Timeline() *Timeline { return d.timeline }

// WriteTimeline gathers every rank's trace on rank 0, which writes them as
// one Chrome trace to path (the examples' --timeline flag). Every rank must
// call it; ranks other than 0 write nothing. It fails with ErrInvalidOption
// when WithTimeline was not given.
func (d *DDP) WriteTimeline(ctx context.Context, path string) error {
	if d.timeline == nil {
		return fmt.Errorf("%w: no timeline: pass ddp.WithTimeline(nil) to Wrap", ErrInvalidOption)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	b, err := gatherTimelines(ctx, d.pg, d.timeline)
	if err != nil || d.pg.Rank() != 0 {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("ddp: timeline: %w", err)
	}
	return nil
}

// Buckets returns the current bucket assignment as parameter names, bucket
// 0 first (the order in which buckets are reduced).
func (d *DDP) Buckets() [][]string {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	out := make([][]string, len(d.r.buckets))
	for i, b := range d.r.buckets {
		for _, p := range b.params {
			out[i] = append(out[i], d.params[p].name)
		}
	}
	return out
}

// Close detaches DDP's hooks from the parameters and gives shared bucket
// memory back to the group: its pages return to /dev/shm at once, and a
// later Wrap may reuse it (gradients that viewed it get their own copy
// first). It does not close the process group, which the caller owns. The
// memory is reused only when every rank has closed before the next Wrap;
// otherwise that Wrap falls back to ordinary buckets on every rank.
func (d *DDP) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.r.close()
	return d.r.releaseShared()
}
