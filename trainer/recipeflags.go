package trainer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/optim"
)

// Recipe is the training recipe Main's flags set: gradient accumulation,
// clipping, the optimizer, the learning-rate schedule, periodic
// evaluation and the MFU peak. Its values are the flags' defaults:
// DefaultRecipe's unless the program sets Defaults.Recipe (GPT-2 takes
// nanoGPT's: AdamW with weight decay 0.1 and beta2 0.95, clip 1, warm-up
// and cosine decay). The zero Recipe is not valid; start from
// DefaultRecipe.
type Recipe struct {
	GradAccum int     // -grad-accum: micro-batches per optimizer step
	Clip      float64 // -clip: global gradient norm; 0: no clipping
	// Optim is -optim: "" keeps the Job's optimizer (Job.NewOpt);
	// "adamw" is nanoGPT's AdamW, weight decay on parameters of two or
	// more dimensions only (optim.DecayGroups).
	Optim string
	// LR is -lr, the peak learning rate: every parameter group starts at
	// it; 0 keeps the optimizer's own (1e-3 for -optim adamw, torch's).
	LR float64
	// Schedule is -lr-schedule: "constant" (none) or "cosine", nanoGPT's
	// linear warm-up over WarmupSteps then cosine decay to MinLR at
	// DecaySteps (0: the run's planned optimizer steps).
	Schedule    string
	WarmupSteps int     // -warmup-steps
	MinLR       float64 // -min-lr
	DecaySteps  int     // -lr-decay-steps
	// WeightDecay, Beta1, Beta2 and Eps are -optim adamw's (torch's
	// AdamW defaults: 0.01, 0.9, 0.999, 1e-8).
	WeightDecay, Beta1, Beta2, Eps float64
	EvalEvery                      int     // -eval-every: optimizer steps; 0: at epoch ends only
	EvalBatches                    int     // -eval-batches: batches per rank an evaluation reads; 0: all
	PeakTFLOPS                     float64 // -peak-tflops: one device's peak for MFU; 0: the table's

	defined map[string]bool // the flags this recipe defined (not the program's own)
	given   map[string]bool // those given on the command line
}

// DefaultRecipe is the flags' own defaults: no accumulation, clipping,
// schedule or periodic evaluation, the Job's optimizer at its own
// learning rate; what every example had before the recipe existed.
func DefaultRecipe() Recipe {
	d := optim.DefaultAdamW()
	return Recipe{GradAccum: 1, Schedule: "constant", WeightDecay: d.WeightDecay, Beta1: d.Beta1, Beta2: d.Beta2, Eps: d.Eps}
}

// define adds the recipe's flags to fs, defaulting to r's values. A flag
// the program already defined (Defaults.Flags: an example's own -lr) is
// left to the program, and the recipe keeps its default for it.
func (r *Recipe) define(fs *flag.FlagSet) {
	r.defined, r.given = map[string]bool{}, map[string]bool{}
	ok := func(name string) bool {
		if fs.Lookup(name) != nil {
			return false
		}
		r.defined[name] = true
		return true
	}
	intVar := func(p *int, name, usage string) {
		if ok(name) {
			fs.IntVar(p, name, *p, usage)
		}
	}
	floatVar := func(p *float64, name, usage string) {
		if ok(name) {
			fs.Float64Var(p, name, *p, usage)
		}
	}
	stringVar := func(p *string, name, usage string) {
		if ok(name) {
			fs.StringVar(p, name, *p, usage)
		}
	}
	intVar(&r.GradAccum, "grad-accum", "micro-batches of -batch-size per optimizer step (torch's gradient accumulation: no_sync on all but the last, each loss divided by N, one all-reduce per step); -max-steps, -metrics-every, -eval-every and the schedule count optimizer steps")
	floatVar(&r.Clip, "clip", "clip the gradients to this global L2 norm before each optimizer step (clip_grad_norm_ after the all-reduce; 0: no clipping); the norm is printed as grad_norm")
	stringVar(&r.Optim, "optim", "optimizer: \"\" the example's own, or adamw (torch's AdamW with -lr, -beta1, -beta2, -eps, and -weight-decay on parameters of 2+ dims only: no decay on biases and LayerNorm, as nanoGPT)")
	floatVar(&r.LR, "lr", "peak learning rate for every parameter group (0: the optimizer's own; 1e-3 for -optim adamw)")
	stringVar(&r.Schedule, "lr-schedule", "learning-rate schedule per optimizer step: constant, or cosine (nanoGPT's: linear warm-up lr*(it+1)/(warmup+1) over -warmup-steps, then cosine decay to -min-lr at -lr-decay-steps); saved in checkpoints")
	intVar(&r.WarmupSteps, "warmup-steps", "optimizer steps of linear warm-up (-lr-schedule cosine)")
	floatVar(&r.MinLR, "min-lr", "learning rate the cosine ends at and keeps (-lr-schedule cosine)")
	intVar(&r.DecaySteps, "lr-decay-steps", "optimizer step at which the cosine reaches -min-lr, warm-up included (-lr-schedule cosine; 0: the run's planned steps, -max-steps or the epochs')")
	floatVar(&r.WeightDecay, "weight-decay", "AdamW's decoupled weight decay on parameters of 2+ dims (-optim adamw)")
	floatVar(&r.Beta1, "beta1", "AdamW's beta1 (-optim adamw)")
	floatVar(&r.Beta2, "beta2", "AdamW's beta2 (-optim adamw; nanoGPT's GPT-2 uses 0.95)")
	floatVar(&r.Eps, "eps", "AdamW's eps (-optim adamw)")
	intVar(&r.EvalEvery, "eval-every", "also evaluate the evaluation set every N optimizer steps (0: after each epoch only)")
	intVar(&r.EvalBatches, "eval-batches", "batches per rank each evaluation reads, the set's first ones (0: all; nanoGPT's eval_iters)")
	floatVar(&r.PeakTFLOPS, "peak-tflops", "one device's peak TFLOPS for the mfu figure (0: the table of known GPUs, dense bf16: H100/H200 989, A100 312; CPUs need it)")
}

// note records which of the recipe's flags the command line gave.
func (r *Recipe) note(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if r.defined[f.Name] {
			r.given[f.Name] = true
		}
	})
}

// check refuses a recipe the job cannot run, and flags given that would
// do nothing.
func (r *Recipe) check(job Job) error {
	switch {
	case r.GradAccum < 1:
		return fmt.Errorf("-grad-accum %d: want 1 or more", r.GradAccum)
	case r.Clip < 0 || r.LR < 0 || r.MinLR < 0 || r.PeakTFLOPS < 0:
		return fmt.Errorf("-clip %g, -lr %g, -min-lr %g and -peak-tflops %g must not be negative", r.Clip, r.LR, r.MinLR, r.PeakTFLOPS)
	case r.WarmupSteps < 0 || r.DecaySteps < 0 || r.EvalEvery < 0 || r.EvalBatches < 0:
		return fmt.Errorf("-warmup-steps %d, -lr-decay-steps %d, -eval-every %d and -eval-batches %d must not be negative",
			r.WarmupSteps, r.DecaySteps, r.EvalEvery, r.EvalBatches)
	case r.Schedule != "constant" && r.Schedule != "cosine":
		return fmt.Errorf("-lr-schedule %q: want constant or cosine", r.Schedule)
	case r.Optim != "" && r.Optim != "adamw":
		return fmt.Errorf("-optim %q: want adamw, or nothing for %s's own optimizer", r.Optim, job.Name)
	case r.Optim == "" && job.NewOpt == nil:
		return fmt.Errorf("%s has no optimizer of its own (Job.NewOpt): give -optim adamw", job.Name)
	case job.NewStep != nil && (r.GradAccum > 1 || r.Clip > 0):
		return fmt.Errorf("-grad-accum and -clip run in the trainer's built-in step, and %s computes its own gradients (Job.NewStep)", job.Name)
	case r.EvalEvery > 0 && job.EvalDataset == nil:
		return fmt.Errorf("-eval-every %d: %s has no evaluation set", r.EvalEvery, job.Name)
	}
	for _, f := range []string{"warmup-steps", "min-lr", "lr-decay-steps"} {
		if r.given[f] && r.Schedule != "cosine" {
			return fmt.Errorf("-%s applies to -lr-schedule cosine, and the schedule is %s", f, r.Schedule)
		}
	}
	for _, f := range []string{"weight-decay", "beta1", "beta2", "eps"} {
		if r.given[f] && r.Optim != "adamw" {
			return fmt.Errorf("-%s applies to -optim adamw; without it %s builds its own optimizer", f, job.Name)
		}
	}
	return nil
}

// active reports whether the run uses any of the recipe (then rank 0
// prints the step lines and the recipe's summary).
func (r *Recipe) active(job Job) bool {
	return r.GradAccum > 1 || r.Clip > 0 || r.Optim != "" || r.Schedule != "constant" || r.EvalEvery > 0 ||
		r.LR > 0 || job.TokensPerSample > 0
}

// optimizer builds the run's optimizer over params: -optim adamw's, or
// the Job's with -lr, when given, as every group's learning rate. It
// returns what to print about it ("" when nothing).
func (r *Recipe) optimizer(job Job, params []*autograd.Variable) (optim.Optimizer, string, error) {
	if r.Optim == "adamw" {
		lr := r.LR
		if lr == 0 {
			lr = optim.DefaultAdamW().LR
		}
		groups := optim.DecayGroups(params, lr, r.WeightDecay)
		opt, err := optim.NewAdamWGroups(groups, optim.AdamConfig{LR: lr, Beta1: r.Beta1, Beta2: r.Beta2, Eps: r.Eps, WeightDecay: r.WeightDecay})
		if err != nil {
			return nil, "", fmt.Errorf("-optim adamw: %w", err)
		}
		count := func(ps []*autograd.Variable) (n int) {
			for _, p := range ps {
				n += p.Value.Numel()
			}
			return n
		}
		return opt, fmt.Sprintf("optimizer: AdamW lr %g betas (%g, %g) eps %g; weight decay %g on %d tensors of 2+ dims (%d parameters), none on %d tensors (%d parameters)",
			lr, r.Beta1, r.Beta2, r.Eps, r.WeightDecay, len(groups[0].Params), count(groups[0].Params), len(groups[1].Params), count(groups[1].Params)), nil
	}
	opt, err := job.NewOpt(params)
	if err != nil {
		return nil, "", err
	}
	if r.LR == 0 {
		return opt, "", nil
	}
	for _, g := range opt.ParamGroups() {
		g.LR = r.LR
	}
	return opt, fmt.Sprintf("optimizer: %s's, lr %g (-lr)", job.Name, r.LR), nil
}

// scheduler builds -lr-schedule's scheduler on opt (nil for constant),
// its decay reaching -min-lr at -lr-decay-steps or the run's planned
// optimizer steps, and says what it does.
func (r *Recipe) scheduler(ctx context.Context, pg comm.ProcessGroup, opt optim.Optimizer, plan stepPlan) (optim.Scheduler, string, error) {
	if r.Schedule != "cosine" {
		return nil, "", nil
	}
	decay, why := r.DecaySteps, "-lr-decay-steps"
	if decay == 0 {
		var err error
		if decay, err = plan.steps(ctx, pg, r.GradAccum); err != nil {
			return nil, "", err
		}
		why = "the run's planned optimizer steps"
	}
	s, err := optim.NewWarmupCosineLR(opt, r.WarmupSteps, decay, r.MinLR)
	if err != nil {
		return nil, "", fmt.Errorf("-lr-schedule cosine: %w", err)
	}
	peak := 0.0
	if gs := opt.ParamGroups(); len(gs) > 0 {
		peak = gs[0].InitialLR
	}
	return s, fmt.Sprintf("lr schedule: linear warm-up over %d steps to %g, cosine decay to %g at step %d (%s)",
		r.WarmupSteps, peak, r.MinLR, decay, why), nil
}

// stepPlan is what the run's optimizer step count depends on.
type stepPlan struct {
	epochs, maxSteps int
	loader           *data.DataLoader
	stream           *data.StreamLoader
}

// steps is the number of optimizer steps the run will take from its
// start (a resumed run's included): the epochs' batches in groups of
// accum, each epoch's last group counting even when short, capped by
// -max-steps. Shards may give ranks different counts; the most any rank
// has is taken (an all-reduce), so every rank builds the same schedule.
func (p stepPlan) steps(ctx context.Context, pg comm.ProcessGroup, accum int) (int, error) {
	groups := func(batches int) int { return (batches + accum - 1) / accum }
	total := 0
	if p.stream != nil {
		was := p.stream.Epoch()
		for e := range p.epochs {
			p.stream.SetEpoch(e)
			total += groups(p.stream.Len())
		}
		p.stream.SetEpoch(was)
		v := []float64{float64(total)}
		if err := pg.AllReduce(comm.Float64s(v), comm.Max).Wait(ctx); err != nil {
			return 0, fmt.Errorf("trainer: the ranks' planned steps: %w", err)
		}
		total = int(v[0])
	} else if p.loader != nil {
		total = p.epochs * groups(p.loader.Len())
	}
	if p.maxSteps > 0 {
		total = min(total, p.maxSteps)
	}
	return total, nil
}

// printTokens prints the run's tokens_per_s (and mfu, with a peak) after
// samples_per_s, for a Job that says how many tokens a sample holds.
func printTokens(out io.Writer, sps float64, job Job, peak float64, world int) {
	if job.TokensPerSample <= 0 {
		return
	}
	tps := sps * float64(job.TokensPerSample)
	if job.FlopsPerToken > 0 && peak > 0 {
		fmt.Fprintf(out, "tokens_per_s=%.1f mfu=%.4f\n", tps, MFU(tps, job.FlopsPerToken, peak, world))
		return
	}
	fmt.Fprintf(out, "tokens_per_s=%.1f\n", tps)
}

// recipeParts is what run needs of the recipe once the optimizer exists.
type recipeParts struct {
	sched optim.Scheduler
	peak  float64 // one device's peak FLOP/s; 0: unknown
	line  *stepLine
}

// setup builds the scheduler, finds the MFU peak and, on rank 0, prints
// the recipe's summary (optimizer, schedule, accumulation, clipping, peak)
// and makes the step line's callback. optDesc is what optimizer said.
func (r *Recipe) setup(ctx context.Context, out io.Writer, pg comm.ProcessGroup, job Job, opt optim.Optimizer,
	optDesc string, plan stepPlan, batch int, rc runConfig, peakOf func() (float64, string)) (recipeParts, error) {
	var rr recipeParts
	sched, schedDesc, err := r.scheduler(ctx, pg, opt, plan)
	if err != nil {
		return rr, err
	}
	rr.sched = sched
	peakDesc := ""
	if job.FlopsPerToken > 0 {
		rr.peak, peakDesc = peakOf()
	}
	if pg.Rank() != 0 || !r.active(job) {
		return rr, nil
	}
	for _, d := range []string{optDesc, schedDesc} {
		if d != "" {
			fmt.Fprintln(out, d)
		}
	}
	if r.GradAccum > 1 {
		fmt.Fprintf(out, "grad accum: %d micro-batches of %d per rank per optimizer step (%d samples a step over %d ranks)\n",
			r.GradAccum, batch, r.GradAccum*batch*pg.Size(), pg.Size())
	}
	if r.Clip > 0 {
		fmt.Fprintf(out, "clip: gradients to global norm %g\n", r.Clip)
	}
	if peakDesc != "" {
		fmt.Fprintf(out, "mfu: %s; %.4g FLOPs per token\n", peakDesc, job.FlopsPerToken)
	}
	rr.line = &stepLine{w: out, every: rc.progressEvery, world: pg.Size(), tokensPerSample: job.TokensPerSample,
		flopsPerToken: job.FlopsPerToken, peak: rr.peak, clip: r.Clip > 0, now: time.Now}
	return rr, nil
}
