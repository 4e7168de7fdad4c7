package zero

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("zero: invalid configuration")

// Inner builds the per-rank optimizer over the shard variables, one group
// per group of the wrapped parameters (a group may be empty on a rank).
type Inner func(groups []optim.ParamGroup) (optim.Optimizer, error)

// AdamW is an Inner of optim.AdamW with cfg's hyperparameters.
func AdamW(cfg optim.AdamConfig) Inner { return adam(cfg, optim.NewAdamW) }

// Adam is an Inner of optim.Adam with cfg's hyperparameters.
func Adam(cfg optim.AdamConfig) Inner { return adam(cfg, optim.NewAdam) }

func adam(cfg optim.AdamConfig, mk func([]*autograd.Variable, optim.AdamConfig) (*optim.Adam, error)) Inner {
	return func(groups []optim.ParamGroup) (optim.Optimizer, error) {
		o, err := mk(nil, cfg)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			if err := o.AddParamGroup(g); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
}

// SGD is an Inner of optim.SGD with cfg's hyperparameters.
func SGD(cfg optim.SGDConfig) Inner {
	return func(groups []optim.ParamGroup) (optim.Optimizer, error) {
		o, err := optim.NewSGD(nil, cfg)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			if err := o.AddParamGroup(g); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
}

// Config holds the options of New.
type Config struct {
	// ReduceGrads makes Step average the gradients itself, with a
	// reduce-scatter (each rank receives only its part). Leave it false
	// when ddp has already all-reduced them.
	ReduceGrads bool
	// Timeout bounds each collective of Step; 0 means the group's own.
	Timeout time.Duration
}

// Optimizer is one rank's ZeroRedundancyOptimizer. It implements
// optim.Optimizer; StateDict and LoadStateDict speak the unsharded
// optimizer's keys (see the package doc).
type Optimizer struct {
	pg     backend.ProcessGroup
	cfg    Config
	outer  []*optim.ParamGroup
	params []*autograd.Variable // flat order
	starts []int                // element offset of each parameter
	n      int                  // elements, unpadded
	chunk  int                  // elements per rank
	lo, hi int                  // this rank's part of [0, n) (hi may pass n: padding)

	inner optim.Optimizer
	// shards[j] views elements [shardLo[j], shardHi[j]) of parameter shardOf[j].
	shards           []*autograd.Variable
	shardGrads       []*tensor.Tensor // views of myG, lent to shards whose parameter has a gradient
	shardOf          []int
	shardLo, shardHi []int

	flatW, flatG []float32 // every rank's parameters and gradients
	myW, myG     []float32 // this rank's part

	consolidated *optim.StateDict
}

// New wraps the parameter groups: each group's Params, LR and WeightDecay
// become the inner optimizer's, restricted to this rank's part. Every rank
// of pg calls it with the same parameters (shapes and order).
func New(pg backend.ProcessGroup, groups []optim.ParamGroup, inner Inner, cfg Config) (*Optimizer, error) {
	if pg == nil || inner == nil {
		return nil, fmt.Errorf("%w: nil process group or inner optimizer", ErrConfig)
	}
	o := &Optimizer{pg: pg, cfg: cfg}
	for gi, g := range groups {
		cp := g
		cp.Params = append([]*autograd.Variable(nil), g.Params...)
		o.outer = append(o.outer, &cp)
		for pi, p := range g.Params {
			if p == nil || p.Value == nil {
				return nil, fmt.Errorf("%w: parameter %d of group %d is nil", ErrConfig, pi, gi)
			}
			if p.Value.DType() != tensor.Float32 || !p.Value.IsContiguous() || p.Value.Device().String() != "cpu" {
				return nil, fmt.Errorf("%w: parameter %d of group %d is %v on %v: zero shards contiguous float32 host parameters",
					ErrConfig, pi, gi, p.Value.DType(), p.Value.Device())
			}
			o.starts = append(o.starts, o.n)
			o.params = append(o.params, p)
			o.n += p.Value.Numel()
		}
	}
	w, r := pg.Size(), pg.Rank()
	o.chunk = (o.n + w - 1) / w
	o.lo, o.hi = r*o.chunk, (r+1)*o.chunk
	o.flatW, o.flatG = make([]float32, o.chunk*w), make([]float32, o.chunk*w)
	o.myW = make([]float32, o.chunk)
	if cfg.ReduceGrads {
		o.myG = make([]float32, o.chunk)
	} else {
		o.myG = o.flatG[o.lo:o.hi]
	}
	innerGroups := make([]optim.ParamGroup, len(o.outer))
	i := 0
	for gi, g := range o.outer {
		innerGroups[gi] = optim.ParamGroup{LR: g.LR, WeightDecay: g.WeightDecay, InitialLR: g.InitialLR}
		for range g.Params {
			a, b := max(o.starts[i], o.lo), min(o.starts[i]+o.params[i].Value.Numel(), o.hi)
			if a < b {
				v := autograd.Param(tensor.FromF32(o.myW[a-o.lo:b-o.lo], b-a))
				v.Grad = tensor.FromF32(o.myG[a-o.lo:b-o.lo], b-a)
				o.shards = append(o.shards, v)
				o.shardGrads = append(o.shardGrads, v.Grad)
				o.shardOf = append(o.shardOf, i)
				o.shardLo, o.shardHi = append(o.shardLo, a-o.starts[i]), append(o.shardHi, b-o.starts[i])
				innerGroups[gi].Params = append(innerGroups[gi].Params, v)
			}
			i++
		}
	}
	var err error
	if o.inner, err = inner(innerGroups); err != nil {
		return nil, err
	}
	return o, nil
}

// NewAdamW is New over one group of params with torch's AdamW (cfg).
func NewAdamW(pg backend.ProcessGroup, params []*autograd.Variable, cfg optim.AdamConfig, zc Config) (*Optimizer, error) {
	return New(pg, []optim.ParamGroup{{Params: params, LR: cfg.LR, WeightDecay: cfg.WeightDecay}}, AdamW(cfg), zc)
}

// Inner is this rank's optimizer over its shard.
func (o *Optimizer) Inner() optim.Optimizer { return o.inner }

// Range is this rank's part of the flat parameter vector, [lo, hi), and N.
func (o *Optimizer) Range() (lo, hi, n int) { return o.lo, min(o.hi, o.n), o.n }

// StateBytes is the size of this rank's optimizer state (its tensors).
func (o *Optimizer) StateBytes() int {
	total := 0
	for _, t := range o.inner.StateDict().Tensors {
		total += t.Numel() * t.DType().Size()
	}
	return total
}

// ParamGroups implements optim.Optimizer: the wrapped groups, whose LR and
// WeightDecay (set by schedulers) the next Step passes to the inner one.
func (o *Optimizer) ParamGroups() []*optim.ParamGroup { return o.outer }

// ZeroGrad implements optim.Optimizer.
func (o *Optimizer) ZeroGrad() {
	for _, p := range o.params {
		p.ZeroGrad()
	}
}

func (o *Optimizer) ctx() (context.Context, context.CancelFunc) {
	if o.cfg.Timeout > 0 {
		return context.WithTimeout(context.Background(), o.cfg.Timeout)
	}
	return context.Background(), func() {}
}

// Step implements optim.Optimizer (collective: every rank calls it).
func (o *Optimizer) Step() error {
	ctx, cancel := o.ctx()
	defer cancel()
	// 1. Gradients (zeros for a parameter without one) and this rank's
	// part of the parameters.
	for i, p := range o.params {
		dst := o.flatG[o.starts[i] : o.starts[i]+p.Value.Numel()]
		if p.Grad == nil {
			clear(dst)
			continue
		}
		if p.Grad.Numel() != p.Value.Numel() || p.Grad.DType() != tensor.Float32 {
			return fmt.Errorf("%w: parameter %d has value %v and grad %v %v", optim.ErrBadGrad, i, p.Value.Shape(), p.Grad.DType(), p.Grad.Shape())
		}
		copy(dst, p.Grad.Contiguous().F32())
	}
	for j, v := range o.shards {
		i := o.shardOf[j]
		copy(v.Value.F32(), o.params[i].Value.F32()[o.shardLo[j]:o.shardHi[j]])
	}
	if o.cfg.ReduceGrads {
		if err := reduceScatter(ctx, o.pg, backend.Float32s(o.myG), backend.Float32s(o.flatG)); err != nil {
			return fmt.Errorf("zero: averaging the gradients: %w", err)
		}
	}
	// 2. Step this rank's part; a parameter with no gradient here is
	// skipped as the unsharded optimizer skips it.
	for gIdx, g := range o.outer {
		ig := o.inner.ParamGroups()[gIdx]
		ig.LR, ig.WeightDecay, ig.InitialLR = g.LR, g.WeightDecay, g.InitialLR
	}
	for j, v := range o.shards {
		v.Grad = o.shardGrads[j]
		if o.params[o.shardOf[j]].Grad == nil {
			v.Grad = nil
		}
	}
	if err := o.inner.Step(); err != nil {
		return err
	}
	// 3. Every rank's updated part to every rank.
	if err := backend.AllGather(o.pg, backend.Float32s(o.flatW), backend.Float32s(o.myW)).Wait(ctx); err != nil {
		return fmt.Errorf("zero: gathering the updated parameters: %w", err)
	}
	for i, p := range o.params {
		copy(p.Value.F32(), o.flatW[o.starts[i]:o.starts[i]+p.Value.Numel()])
	}
	o.consolidated = nil
	return nil
}

// reduceScatter averages in across the group into out (rank r's chunk),
// with an all-reduce where the group has no reduce-scatter.
func reduceScatter(ctx context.Context, pg backend.ProcessGroup, out, in backend.Buffer) error {
	if _, ok := backend.As[backend.ReduceScatterer](pg); ok {
		return backend.ReduceScatter(pg, out, in, backend.Avg).Wait(ctx)
	}
	if err := pg.AllReduce(in, backend.Avg).Wait(ctx); err != nil {
		return err
	}
	n := len(out.Bytes)
	copy(out.Bytes, in.Bytes[pg.Rank()*n:(pg.Rank()+1)*n])
	return nil
}

// gather collects every rank's in on root (out on root holds Size chunks),
// with an all-gather where the group has no gather.
func gather(ctx context.Context, pg backend.ProcessGroup, out, in backend.Buffer, root int) error {
	if _, ok := backend.As[backend.Gatherer](pg); ok {
		return backend.Gather(pg, out, in, root).Wait(ctx)
	}
	return backend.AllGather(pg, out, in).Wait(ctx)
}

// stateNames are the per-parameter state tensors of the inner optimizer.
func stateNames(sd *optim.StateDict) []string {
	switch sd.Kind {
	case "Adam", "AdamW":
		if sd.Scalars["amsgrad"] != 0 {
			return []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
		}
		return []string{"exp_avg", "exp_avg_sq"}
	case "SGD":
		if sd.Scalars["momentum"] != 0 {
			return []string{"momentum_buffer"}
		}
	}
	return nil
}

// ConsolidateStateDict gathers the optimizer state on rank to (collective:
// every rank calls it), whose StateDict is then the unsharded optimizer's.
func (o *Optimizer) ConsolidateStateDict(ctx context.Context, to int) error {
	if to < 0 || to >= o.pg.Size() {
		return fmt.Errorf("%w: consolidate to rank %d of %d", ErrConfig, to, o.pg.Size())
	}
	local := o.inner.StateDict()
	w := o.pg.Size()
	// Step counts per parameter (-1: no state here), reduced by max.
	steps := make([]float64, len(o.params))
	for i := range steps {
		steps[i] = -1
	}
	for j, i := range o.shardOf {
		if s, ok := local.Scalars[fmt.Sprintf("state.%d.step", j)]; ok {
			steps[i] = s
		}
		if _, ok := local.Tensors[fmt.Sprintf("state.%d.%s", j, firstOr(stateNames(local), ""))]; ok && steps[i] < 0 {
			steps[i] = 0 // stateful without a step count (SGD)
		}
	}
	if err := o.pg.AllReduce(backend.Float64s(steps), backend.Max).Wait(ctx); err != nil {
		return fmt.Errorf("zero: consolidating step counts: %w", err)
	}
	full := optim.NewStateDict(local.Kind)
	for k, v := range local.Scalars {
		if !strings.HasPrefix(k, "state.") {
			full.Scalars[k] = v
		}
	}
	for gi, g := range o.outer {
		full.Scalars[fmt.Sprintf("param_groups.%d.num_params", gi)] = float64(len(g.Params))
	}
	mine := make([]float32, o.chunk)
	all := make([]float32, o.chunk*w)
	for _, name := range stateNames(local) {
		clear(mine)
		for j, i := range o.shardOf {
			if t, ok := local.Tensors[fmt.Sprintf("state.%d.%s", j, name)]; ok {
				copy(mine[o.starts[i]+o.shardLo[j]-o.lo:], t.F32())
			}
		}
		if err := gather(ctx, o.pg, backend.Float32s(all), backend.Float32s(mine), to); err != nil {
			return fmt.Errorf("zero: consolidating %s: %w", name, err)
		}
		if o.pg.Rank() != to {
			continue
		}
		for i, p := range o.params {
			if steps[i] < 0 {
				continue
			}
			v := append([]float32(nil), all[o.starts[i]:o.starts[i]+p.Value.Numel()]...)
			full.Tensors[fmt.Sprintf("state.%d.%s", i, name)] = tensor.FromF32(v, p.Value.Shape()...)
		}
	}
	if local.Kind == "Adam" || local.Kind == "AdamW" {
		for i, s := range steps {
			if s >= 0 {
				full.Scalars[fmt.Sprintf("state.%d.step", i)] = s
			}
		}
	}
	o.consolidated = nil
	if o.pg.Rank() == to {
		o.consolidated = full
	}
	return nil
}

func firstOr(s []string, d string) string {
	if len(s) > 0 {
		return s[0]
	}
	return d
}

// StateDict implements optim.Optimizer. On the rank that the last
// ConsolidateStateDict gathered to (and until the next Step) it is the
// unsharded optimizer's state dict; elsewhere it is this rank's shard,
// of kind "zero shard of <kind>", which LoadStateDict refuses.
func (o *Optimizer) StateDict() *optim.StateDict {
	if o.consolidated != nil {
		return o.consolidated
	}
	sd := o.inner.StateDict()
	sd.Kind = "zero shard of " + sd.Kind
	return sd
}

// LoadStateDict implements optim.Optimizer: sd is an unsharded optimizer's
// (or a consolidated one's), saved at any world size; every rank keeps
// its part.
func (o *Optimizer) LoadStateDict(sd *optim.StateDict) error {
	if sd == nil {
		return fmt.Errorf("%w: nil state dict", optim.ErrStateDict)
	}
	if strings.HasPrefix(sd.Kind, "zero shard of ") {
		return fmt.Errorf("%w: %s is one rank's shard; call ConsolidateStateDict and save the consolidating rank's StateDict",
			optim.ErrStateDict, sd.Kind)
	}
	inner := optim.NewStateDict(sd.Kind)
	for k, v := range sd.Scalars {
		if !strings.HasPrefix(k, "state.") {
			inner.Scalars[k] = v
		}
	}
	for gi, g := range o.inner.ParamGroups() {
		inner.Scalars[fmt.Sprintf("param_groups.%d.num_params", gi)] = float64(len(g.Params))
	}
	for gi, g := range o.outer {
		if np, ok := sd.Scalars[fmt.Sprintf("param_groups.%d.num_params", gi)]; ok && int(np) != len(g.Params) {
			return fmt.Errorf("%w: group %d has %d parameters in the state dict, %d here", optim.ErrStateDict, gi, int(np), len(g.Params))
		}
	}
	for j, i := range o.shardOf {
		if s, ok := sd.Scalars[fmt.Sprintf("state.%d.step", i)]; ok {
			inner.Scalars[fmt.Sprintf("state.%d.step", j)] = s
		}
		for k, t := range sd.Tensors {
			name, ok := strings.CutPrefix(k, fmt.Sprintf("state.%d.", i))
			if !ok {
				continue
			}
			if t.Numel() != o.params[i].Value.Numel() || t.DType() != tensor.Float32 {
				return fmt.Errorf("%w: %s is %v %v, parameter %d is %v", optim.ErrStateDict, k, t.DType(), t.Shape(), i, o.params[i].Value.Shape())
			}
			part := append([]float32(nil), t.Contiguous().F32()[o.shardLo[j]:o.shardHi[j]]...)
			inner.Tensors[fmt.Sprintf("state.%d.%s", j, name)] = tensor.FromF32(part, len(part))
		}
	}
	if err := o.inner.LoadStateDict(inner); err != nil {
		return err
	}
	for gi, g := range o.outer {
		p := fmt.Sprintf("param_groups.%d.", gi)
		g.LR, g.InitialLR, g.WeightDecay = sd.Scalars[p+"lr"], sd.Scalars[p+"initial_lr"], sd.Scalars[p+"weight_decay"]
	}
	o.consolidated = nil
	return nil
}

var _ optim.Optimizer = (*Optimizer)(nil)

// Group is the process group the state is sharded over.
func (o *Optimizer) Group() backend.ProcessGroup { return o.pg }
