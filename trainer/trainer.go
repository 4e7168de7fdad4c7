package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"time"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/metrics"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// LossFunc computes the loss of a model output against a batch.
type LossFunc func(out *autograd.Variable, b data.Batch) *autograd.Variable

// ForwardLossFunc computes the loss of a batch from the model's input in
// one call: the model's forward taking the targets, as nanoGPT's
// model(idx, targets), which may fuse its last layer with the loss (see
// Config.ForwardLoss). x is b.Inputs, on the model's device.
type ForwardLossFunc func(x *autograd.Variable, b data.Batch) *autograd.Variable

// StepFunc runs one training step on a batch (forward, backward through
// the DDP model, optimizer step) and returns this rank's loss: for a model
// that computes its own loss and gradients, such as a gorgonia graph under
// ddp/gorgoniaddp. See Config.Step.
type StepFunc func(ctx context.Context, b data.Batch) (loss float64, err error)

// Trainer is the tutorial's Trainer{model, train_data, optimizer, gpu_id,
// save_every}: it runs batches and epochs, evaluates, saves checkpoints
// from rank 0 and resumes from them. Every rank builds its own Trainer and
// calls the same methods in the same order; they talk through the
// model's process group.
type Trainer struct {
	model     *ddp.DDP
	trainData *data.DataLoader
	sampler   *data.DistributedSampler
	stream    *data.StreamLoader // instead of trainData and sampler
	optimizer optim.Optimizer
	scaler    *amp.GradScaler // nil: no loss scaling
	gpuID     int             // the local rank, as in the tutorial
	saveEvery int
	maxSteps  int
	batchSize int

	loss   LossFunc
	stepFn StepFunc
	pg     comm.ProcessGroup
	ckpt   *checkpoint.Manager // nil: no checkpoints
	out    io.Writer
	step   int
	start  int // first epoch to run (after a resume)

	// forwardLoss, when set, computes the training loss in place of
	// model.Forward then loss (Config.ForwardLoss)
	forwardLoss ForwardLossFunc

	resumedFrom  string // the checkpoint resumed from, "" if none
	resumedEpoch int

	// throughput, counted once the warm-up steps are done (measure.go)
	samples    int64
	measured   time.Duration
	warm       bool                  // the warm-up is over; the clock runs
	warmSkip   int                   // warm-up steps to skip; -1 before the first epoch
	clockStart time.Time             // when the current measured stretch began
	clockN     int64                 // samples in the current stretch
	kprof      *tensor.KernelProfile // nil: none (measure.go)
	kprofStop  func()                // ends kprof's current recording

	evalData *data.DataLoader // nil: no evaluation
	device   string           // this rank's device in log lines, e.g. "cpu0"
	dev      tensor.Device    // where the model lives; batches go there
	mon      monitor          // running loss and the records (monitor.go)
	hooks    hooks

	stopReason string // Stop's request on this rank
	stopped    string // the agreed reason training stopped, "" if it did not

	// the recipe (recipe.go)
	gradAccum int             // micro-batches per optimizer step (>= 1)
	clipNorm  float64         // 0: no clipping
	sched     optim.Scheduler // nil: none
	// stepLR is the learning rate the last optimizer step used (stepped:
	// there was one): what records and step lines show, as nanoGPT
	// prints the lr of its iteration, not the one the scheduler set for
	// the next.
	stepLR      float64
	stepped     bool
	evalEvery   int                  // optimizer steps between evaluations; 0: at epoch ends only
	evalBatches int                  // batches per rank an evaluation reads; 0: all
	lastNorm    float64              // the gradient norm before the last clip
	params      []*autograd.Variable // the model's, for clipping and rescaling
	evalPending bool                 // the step that just ended is due an evaluation
	evenEpoch   bool                 // every rank has as many batches this epoch
	unevenSaid  bool                 // rank 0 said periodic evaluation skips uneven epochs

	tokensPerSample int     // 0: no tokens_per_s in the records
	flopsPerToken   float64 // 0: no mfu
	peak            float64 // one device's peak FLOP/s; 0: no mfu
}

// Config carries what the tutorial passes to Trainer's constructor, plus the
// goddp-specific pieces.
type Config struct {
	Model     *ddp.DDP
	TrainData *data.DataLoader
	Sampler   *data.DistributedSampler
	// TrainStream, instead of TrainData and Sampler, streams the training
	// set from shard files (data.OpenShards). Ranks may then get different
	// numbers of batches: each epoch runs inside DDP's Join, so a rank that
	// runs out shadows the others' collectives. A resume starts at an
	// epoch's beginning (a stream keeps no position within an epoch).
	TrainStream *data.StreamLoader
	Optimizer   optim.Optimizer
	// Scaler, when set, runs the built-in step with dynamic loss scaling
	// (float16 training, torch's GradScaler): the loss is scaled before
	// backward, a step whose gradients overflowed is skipped, and the
	// scaler's state is saved in checkpoints and restored on resume. It
	// needs the built-in step (not Step). Build it with amp.WithGroup on the
	// model's process group, so every rank skips the same steps.
	Scaler    *amp.GradScaler
	GPUID     int
	SaveEvery int // save a checkpoint every N epochs (epoch%N == 0) and after the last; 0: never
	// MaxSteps, when positive, ends training after this many optimizer
	// steps in all (counted across epochs and resumes, as Lightning's
	// max_steps): the epoch it falls in ends there, is evaluated and saved
	// as the last, and Train returns.
	MaxSteps  int
	BatchSize int
	Loss      LossFunc
	// ForwardLoss, when set, computes each training batch's loss in place
	// of Loss(Model.Forward(x), b): the model's forward taking the targets
	// (nanoGPT's model(idx, targets)), so that a model can fuse its head
	// with the loss and hold less memory (models/gpt2's Model.ForwardLoss
	// computes the tied head and cross-entropy as one op). It must equal
	// Forward then Loss: the trainer runs it inside DDP's ForwardFunc, with
	// Forward's collectives, no_sync and unused-parameter bookkeeping, and
	// trains on its result as on Loss's. Evaluation keeps Forward and Loss
	// (it reads the outputs for the accuracy). It needs the built-in step.
	ForwardLoss ForwardLossFunc
	// Step, when set, runs each training batch instead of the built-in
	// forward, Loss, backward and optimizer step; Loss is then needed only
	// for EvalData.
	Step     StepFunc
	CkptDir  string // "" disables checkpoints
	KeepLast int    // checkpoints kept in CkptDir (default 3)
	// Fresh starts over even when CkptDir holds checkpoints: rank 0 moves
	// them into a new subdirectory, CkptDir/previous-<UTC time>/, and says
	// so. Nothing is deleted: they may be another run's.
	Fresh bool
	// Out receives the log lines (default os.Stdout).
	Out io.Writer
	// EvalData, when set, is evaluated after every epoch in eval mode and
	// without recording gradients; its loss and (for labelled batches)
	// accuracy are reduced over the ranks and printed by rank 0 as
	// "epoch=E test_loss=L test_acc=A". Shard it with a DistributedSampler
	// in SamplerEval mode, so each sample counts once.
	EvalData *data.DataLoader
	// Device names this rank's device in the log lines (the tutorial's
	// "[GPU0]"); "" means "cpu<GPUID>", the local rank's CPU slot.
	Device string
	// OnDevice is where the model's parameters live (nn.To); batches are
	// moved there before the forward pass. nil means the CPU.
	OnDevice tensor.Device
	// Loggers receive rank 0's records (Record): a train record every
	// LogEvery steps (default 10), an epoch record at each epoch's end and
	// an eval record after each evaluation. Other ranks never call them.
	Loggers  []Logger
	LogEvery int
	// Callbacks are called on every rank; see Callback.
	Callbacks []Callback
	// KernelProfile, when set, records the host's matrix-product and
	// convolution kernels over the steps that samples_per_s measures (the
	// warm-up, evaluation and checkpoints left out); see
	// tensor.KernelProfile and KernelReport. It records the whole process's
	// kernels, so give it to one Trainer per process (one rank per
	// process, as launchers run them); KernelReport and Close stop it.
	KernelProfile *tensor.KernelProfile

	// GradAccum, when above 1, makes each optimizer step take this many
	// batches (micro-batches) of the loader, as torch's gradient
	// accumulation: the first GradAccum-1 backward passes run under
	// ddp.NoSync, the last all-reduces their sum once, and each loss is
	// divided by GradAccum before backward, so the step's gradient is that
	// of the micro-batches' mean loss. An epoch whose batch count is not a
	// multiple steps on its last, shorter group too, with its gradient
	// multiplied by GradAccum/k for its k micro-batches: still the mean
	// loss's. Under Join (shards dealing ranks uneven batch counts) every
	// rank keeps the cadence of one synchronised backward per GradAccum
	// batches, which the ranks still training keep, so a rank's short last
	// group is dropped instead, never all-reduced (as in torch's
	// `if (i+1) % accum == 0: step` loop). Step, MaxSteps, LogEvery, the
	// schedule and the progress bar count optimizer steps; samples_per_s
	// counts every micro-batch's samples. It needs the built-in step.
	GradAccum int
	// ClipNorm, when positive, clips the gradients to this global L2 norm
	// before every optimizer step (torch.nn.utils.clip_grad_norm_ over the
	// model's parameters, after GradAccum's all-reduce and the GradScaler's
	// unscale). DDP leaves every rank the same averaged gradients, so each
	// rank's own norm is already the norm across ranks, and no collective
	// is needed (a ZeRO optimizer, optim/zero, still receives whole
	// gradients from DDP). It needs the built-in step.
	ClipNorm float64
	// Scheduler, when set, is stepped after every optimizer step (torch's
	// sched.step() per iteration), and its state is saved in checkpoints
	// and restored on resume.
	Scheduler optim.Scheduler
	// EvalEvery, when positive, also evaluates EvalData every EvalEvery
	// optimizer steps (nanoGPT's eval_interval), printed as "epoch=E
	// step=S test_loss=L test_acc=A", logged and passed to the EvalHooks
	// like the epoch's evaluation; a step that ends its epoch is left to
	// the epoch's evaluation. Epochs in which ranks have uneven batch
	// counts (shards under Join) skip it: its reduction is a collective
	// the ranks that ran out would not join.
	EvalEvery int
	// TokensPerSample, FlopsPerToken and PeakFLOPS (one device's), when
	// positive, add tokens_per_s and mfu to the train and epoch records
	// (see Job.TokensPerSample and FlopsPerToken, MFU).
	TokensPerSample int
	FlopsPerToken   float64
	PeakFLOPS       float64
	// EvalBatches, when positive, caps every evaluation at this many
	// batches per rank (nanoGPT's eval_iters): the first EvalBatches of
	// the evaluation set each time, so that successive values compare.
	EvalBatches int
}

// New builds a Trainer. Rank 0 locks CkptDir for the run (see
// checkpoint.Manager.Lock; Close releases it): when another job holds it,
// every rank fails here, before training, and nothing in the directory is
// touched. When CkptDir holds a valid checkpoint, every rank resumes from it
// (rank 0 reads it and broadcasts it), unless Fresh is set.
func New(ctx context.Context, cfg Config) (*Trainer, error) {
	if cfg.Model == nil || cfg.Optimizer == nil || (cfg.TrainStream == nil && (cfg.TrainData == nil || cfg.Sampler == nil)) {
		return nil, fmt.Errorf("trainer: Config needs Model, Optimizer, and TrainData with Sampler or TrainStream")
	}
	if cfg.TrainStream != nil && (cfg.TrainData != nil || cfg.Sampler != nil) {
		return nil, fmt.Errorf("trainer: Config has both TrainStream and TrainData/Sampler; give one")
	}
	if cfg.Scaler != nil && cfg.Step != nil {
		return nil, fmt.Errorf("trainer: Config has Scaler and Step: loss scaling runs in the built-in step, and a custom Step computes its own gradients")
	}
	if cfg.ForwardLoss != nil && cfg.Step != nil {
		return nil, fmt.Errorf("trainer: Config has ForwardLoss and Step: ForwardLoss runs in the built-in step, and a custom Step computes its own loss")
	}
	if cfg.Loss == nil && (cfg.Step == nil || cfg.EvalData != nil) {
		return nil, fmt.Errorf("trainer: Config needs Loss (only a Config with Step and no EvalData does without)")
	}
	if err := cfg.checkRecipe(); err != nil {
		return nil, err
	}
	h, err := newHooks(cfg.Callbacks)
	if err != nil {
		return nil, err
	}
	t := &Trainer{model: cfg.Model, trainData: cfg.TrainData, sampler: cfg.Sampler, stream: cfg.TrainStream,
		optimizer: cfg.Optimizer, scaler: cfg.Scaler, gpuID: cfg.GPUID, saveEvery: cfg.SaveEvery, maxSteps: cfg.MaxSteps, batchSize: cfg.BatchSize,
		loss: cfg.Loss, forwardLoss: cfg.ForwardLoss, stepFn: cfg.Step, pg: cfg.Model.ProcessGroup(), out: cfg.Out,
		device: cfg.Device, mon: monitor{loggers: cfg.Loggers, every: cfg.LogEvery},
		evalData: cfg.EvalData, dev: cfg.OnDevice, hooks: h, warmSkip: -1, kprof: cfg.KernelProfile,
		gradAccum: max(cfg.GradAccum, 1), clipNorm: cfg.ClipNorm, sched: cfg.Scheduler, params: cfg.Model.Parameters(),
		evalEvery: cfg.EvalEvery, evalBatches: cfg.EvalBatches,
		tokensPerSample: cfg.TokensPerSample, flopsPerToken: cfg.FlopsPerToken, peak: cfg.PeakFLOPS}
	if t.device == "" {
		t.device = fmt.Sprintf("cpu%d", cfg.GPUID)
	}
	if t.mon.every <= 0 {
		t.mon.every = 10
	}
	if t.out == nil {
		t.out = os.Stdout
	}
	if cfg.CkptDir != "" {
		keep := cfg.KeepLast
		if keep <= 0 {
			keep = 3
		}
		m, err := checkpoint.NewManager(cfg.CkptDir, checkpoint.Keep(keep))
		if err != nil {
			return nil, fmt.Errorf("trainer: checkpoint dir: %w", err)
		}
		t.ckpt = m
		if err := checkpoint.LockOnRank0(ctx, t.pg, m); err != nil {
			m.Close()
			if t.pg.Rank() != 0 {
				letRank0ReportFirst(ctx)
			}
			return nil, fmt.Errorf("trainer: checkpoint dir: %w", err)
		}
		if cfg.Fresh {
			if err := t.moveAside(ctx); err != nil {
				m.Close()
				return nil, err
			}
		}
		if err := t.resume(ctx); err != nil {
			m.Close()
			return nil, err
		}
	}
	return t, nil
}

// Close releases the checkpoint directory for the next run.
func (t *Trainer) Close() error {
	t.stopKernels() // a Train that failed mid-epoch left the profile recording
	if t.ckpt == nil {
		return nil
	}
	if err := t.ckpt.Close(); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}

// letRank0ReportFirst delays a rank's exit after rank 0 failed and told it
// why: rank 0, which holds the full story, then exits first and the
// launcher reports it as the root cause; the launcher then stops this rank
// (ctx ends), or it gives up waiting after a few seconds.
func letRank0ReportFirst(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(3 * time.Second):
	}
}

// Rank is this rank's number in the process group.
func (t *Trainer) Rank() int { return t.pg.Rank() }

// Device names this rank's device, as the log lines do ("cpu0", "sim:1").
func (t *Trainer) Device() string { return t.device }

// Step is the number of optimizer steps taken so far (resumed ones included).
func (t *Trainer) Step() int { return t.step }

// Model is the DDP-wrapped model.
func (t *Trainer) Model() *ddp.DDP { return t.model }

// Done reports whether a resumed run has nothing left to train for
// maxEpochs, and the checkpoint it resumed from and that checkpoint's
// epoch: running again a job that finished.
func (t *Trainer) Done(maxEpochs int) (done bool, path string, epoch int) {
	return t.resumedFrom != "" && t.start >= maxEpochs, t.resumedFrom, t.resumedEpoch
}

// Stop asks training to stop at the end of the current epoch. Ranks agree
// there: when any rank asked, every rank stops after the same epoch (so no
// rank waits in a collective for one that left). Train then returns nil,
// and rank 0 prints the reason.
func (t *Trainer) Stop(reason string) {
	if t.stopReason == "" {
		t.stopReason = reason
	}
}

// Stopped returns why training stopped early, or "" when it ran every epoch.
func (t *Trainer) Stopped() string { return t.stopped }

func (t *Trainer) logf(format string, args ...any) {
	if t.pg.Rank() == 0 {
		fmt.Fprintf(t.out, format, args...)
	}
}

// microBatch runs one batch's forward and backward, the first of a step
// zeroing the gradients, every one but the step's last under ddp.NoSync
// (its gradients only accumulate), and returns its unscaled loss. The loss
// is divided by accum before backward (torch's loss / accumulation_steps).
func (t *Trainer) microBatch(b data.Batch, first, last bool, accum int) (*autograd.Variable, error) {
	if first {
		t.optimizer.ZeroGrad()
	}
	if !last {
		// Forward decides: a forward under NoSync leaves backward local.
		t.model.EnterNoSync()
		defer t.model.ExitNoSync()
	}
	loss, err := t.forward(b)
	if err != nil {
		return nil, err
	}
	if loss.Value.Numel() != 1 {
		return nil, fmt.Errorf("loss has shape %v, want a scalar", loss.Value.Shape())
	}
	// The graph's root is the loss divided by accum, then scaled by the
	// GradScaler; the loss logged stays the plain one.
	root := loss
	if accum > 1 {
		root = autograd.Scale(root, 1/float64(accum))
	}
	if t.scaler != nil {
		root = t.scaler.ScaleLoss(root)
	}
	// The step's activations are read no more once backward has passed
	// them: the pass gives each value and what its op saved back to the
	// allocator's cache as soon as the op's backward has run, so the
	// backward's gradients take those blocks and the step peaks at its
	// activations (autograd's BackwardAndFree, torch's backward() dropping
	// the graph). Parameters and their gradients are kept, and so is loss,
	// inside root's graph (a Scale below the GradScaler's): it is read
	// after the step.
	if err := root.BackwardAndFree(loss); err != nil {
		return nil, err
	}
	return loss, nil
}

// forward returns b's training loss: Config.ForwardLoss's inside DDP's
// ForwardFunc when set (DDP then arms its reducer from the loss, whose
// graph reaches the same parameters as the output's), else Loss of the
// DDP model's Forward.
func (t *Trainer) forward(b data.Batch) (*autograd.Variable, error) {
	x := autograd.Const(b.Inputs)
	if t.forwardLoss != nil {
		return t.model.ForwardFunc(func() *autograd.Variable { return t.forwardLoss(x, b) })
	}
	output, err := t.model.Forward(x)
	if err != nil {
		return nil, err
	}
	return t.loss(output, b), nil
}

// optimizerStep ends a step of k micro-batches (of accum): it makes a short
// group's gradient the mean loss's, unscales (with a GradScaler) and clips,
// steps the optimizer and the scheduler, and counts the step.
func (t *Trainer) optimizerStep(ctx context.Context, k, accum int) error {
	end := t.model.Timeline().Span("optimizer")
	defer end()
	if k < accum {
		// Each loss was divided by accum, so the sum is k/accum of the
		// mean's gradient. Only an even epoch steps a short group, and
		// there every rank has the same k, so the rescaled gradients stay
		// identical on all ranks.
		for _, p := range t.params {
			if p.Grad != nil {
				tensor.ScaleInto(p.Grad, float64(accum)/float64(k))
			}
		}
	}
	var err error
	if t.clipNorm > 0 {
		if t.scaler != nil {
			// torch's scaler.unscale_(optimizer) before clip_grad_norm_:
			// the norm is the true gradients'.
			if err := t.scaler.Unscale(ctx, t.optimizer); err != nil {
				return err
			}
		}
		t.lastNorm = optim.ClipGradNorm(t.params, t.clipNorm)
	}
	if t.scaler != nil {
		// Unscales (unless done above), skips the step when a gradient
		// overflowed on any rank, and moves the scale; a skipped step still
		// counts as a step, as in torch's loop.
		_, err = t.scaler.Step(ctx, t.optimizer)
		t.scaler.Update()
	} else {
		err = t.optimizer.Step()
	}
	if err != nil {
		return err
	}
	t.stepLR, t.stepped = t.groupLR(), true // before the schedule moves it
	if t.sched != nil {
		t.sched.Step()
	}
	t.step++
	return nil
}

// runGroup trains one optimizer step from b, the first batch of its group,
// pulling up to GradAccum-1 more from next. A batch is known to be its
// group's last before its forward (DDP's NoSync is decided there): it is
// the GradAccum-th, or the loader has no batch after it. Looking one batch
// ahead happens only inside a group, whose batches are all trained, so a
// loader's resumable position never passes a batch that was not.
func (t *Trainer) runGroup(ctx context.Context, epoch int, b data.Batch, err error,
	next func() (data.Batch, error, bool), n, i, g *int, steps int) error {
	if t.stepFn != nil {
		if err != nil {
			return fmt.Errorf("trainer: epoch %d: %w", epoch, err)
		}
		return t.customStep(ctx, epoch, b, n, i, g, steps)
	}
	accum := max(t.gradAccum, 1)
	var losses [8]*autograd.Variable
	ls := losses[:0]
	samples := 0
	for k := 0; ; k++ {
		if err != nil {
			return fmt.Errorf("trainer: epoch %d: %w", epoch, err)
		}
		last, tail := k == accum-1, false
		var nb data.Batch
		var nerr error
		if !last {
			var more bool
			nb, nerr, more = next()
			// The epoch's last batch ends a short group. Under Join the
			// ranks that still train are mid-group, not synchronising: a
			// short tail is then never all-reduced, and dropped, so that
			// every rank keeps the cadence of one synchronised backward
			// per GradAccum batches.
			tail = !more
			last = tail && t.evenEpoch
		}
		loaded := b
		if b, err = toDevice(b, t.dev); err != nil {
			return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, *g, err)
		}
		loss, err := t.microBatch(b, k == 0, last, accum)
		releaseCopies(loaded, b)
		if err != nil {
			return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, *g, err)
		}
		ls = append(ls, loss)
		samples += b.Size()
		*i++
		if last {
			if err := t.optimizerStep(ctx, len(ls), accum); err != nil {
				return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, *g, err)
			}
			break
		}
		if tail {
			return nil // dropped: no step (the next group's ZeroGrad clears it)
		}
		b, err = nb, nerr
	}
	// The losses are read once the whole step is queued: on a device Item
	// waits for the queue, and reading one before the next micro-batch
	// would hold the host back until its backward had run on the device.
	sum := 0.0
	for _, l := range ls {
		sum += l.Value.Item()
	}
	t.mon.lastLoss = sum / float64(len(ls))
	return t.stepDone(ctx, epoch, samples, n, g, steps)
}

// customStep runs Config.Step on one batch as one optimizer step.
func (t *Trainer) customStep(ctx context.Context, epoch int, b data.Batch, n, i, g *int, steps int) error {
	loaded := b
	b, err := toDevice(b, t.dev)
	if err != nil {
		return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, *g, err)
	}
	loss, err := t.stepFn(ctx, b)
	releaseCopies(loaded, b)
	t.mon.lastLoss = loss
	t.step++
	if err != nil {
		return fmt.Errorf("trainer: epoch %d step %d: %w", epoch, *g, err)
	}
	t.stepLR, t.stepped = t.groupLR(), true // before the schedule moves it
	if t.sched != nil {
		t.sched.Step()
	}
	*i++
	return t.stepDone(ctx, epoch, b.Size(), n, g, steps)
}

// stepDone counts a finished optimizer step of samples samples (g counts
// the epoch's steps, n its samples) for the clock, the records and the
// step hooks, and marks it for evaluation when EvalEvery says so.
func (t *Trainer) stepDone(ctx context.Context, epoch, samples int, n, g *int, steps int) error {
	*n += samples
	*g++
	t.stepClock(*g, samples)
	if err := t.observeStep(epoch, samples); err != nil {
		return err
	}
	if err := t.hooks.onStep(ctx, t, StepInfo{Epoch: epoch, Step: t.step, Index: *g, Steps: steps,
		Loss: t.mon.lastLoss, RunningLoss: t.mon.running, Samples: samples}); err != nil {
		return err
	}
	if t.evalEvery > 0 && t.evalData != nil && t.step%t.evalEvery == 0 {
		t.evalPending = true
	}
	return nil
}

// RunEpoch trains one epoch: every batch of this rank's shard through
// forward, backward (DDP all-reduces the gradients) and the optimizer,
// GradAccum batches per optimizer step. Train calls it; call it directly
// to drive the epochs yourself.
func (t *Trainer) RunEpoch(ctx context.Context, epoch int) error {
	var batches func(context.Context) iter.Seq2[data.Batch, error]
	var bsz, nb int
	if t.stream != nil {
		t.stream.SetEpoch(epoch)
		bsz, nb = t.batchSize, t.stream.Len()
		batches = t.stream.All
	} else {
		t.sampler.SetEpoch(epoch)
		// The tutorial peeks len(next(iter(train_data))[0]); peeking here would
		// consume a batch of the sampler's resumable position, so use the size.
		bsz = min(t.batchSize, t.sampler.Len())
		nb = t.trainData.Len()
		batches = t.trainData.All
	}
	accum := max(t.gradAccum, 1)
	steps := (nb + accum - 1) / accum // optimizer steps; the last group may be short
	// Every rank prints its line, naming its device, as in the tutorial;
	// ddprun --local-ranks-filter chooses which are shown.
	if accum > 1 {
		fmt.Fprintf(t.out, "[%s] Epoch %d | Batchsize: %d | Steps: %d | Grad accum: %d\n", t.device, epoch, bsz, steps, accum)
	} else {
		fmt.Fprintf(t.out, "[%s] Epoch %d | Batchsize: %d | Steps: %d\n", t.device, epoch, bsz, steps)
	}
	began := time.Now()
	t.mon.epochStarted(began)
	t.epochClock(steps)
	n, i, g := 0, 0, 0
	loop := func() error {
		next, stop := iter.Pull2(batches(ctx))
		defer stop()
		for {
			if t.maxSteps > 0 && t.step >= t.maxSteps {
				break
			}
			b, err, more := next()
			if !more {
				break
			}
			// A step due an evaluation that ended the epoch (or the run)
			// is left to the epoch's: it runs only once a batch follows.
			if t.evalPending {
				t.evalPending = false
				if err := t.periodicEval(ctx, epoch); err != nil {
					return err
				}
			}
			if err := t.runGroup(ctx, epoch, b, err, next, &n, &i, &g, steps); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	t.evenEpoch = true
	if t.stream != nil {
		if t.evenEpoch, err = t.evenSteps(ctx, nb); err != nil {
			return err
		}
	}
	if !t.evenEpoch {
		// Shards give ranks uneven batch counts: Join lets the ranks that
		// finish first shadow the collectives of those still training.
		err = t.model.Join(ctx, loop)
	} else {
		err = loop()
	}
	t.evalPending = false
	if err != nil {
		return err
	}
	elapsed := time.Since(began)
	t.stopClock()
	// Rank 0's mean training loss over the epoch's steps, as torch's anchors print it.
	t.logf("epoch=%d loss=%.4f\n", epoch, t.mon.epochMean())
	return t.endEpochMetrics(ctx, epoch, elapsed, n)
}

// evenSteps reports whether every rank has steps batches this epoch. Then
// the epoch needs no Join, whose per-step all-reduce (to find the ranks that
// ran out) would cost every step a synchronisation of all ranks.
func (t *Trainer) evenSteps(ctx context.Context, steps int) (bool, error) {
	mm := []float64{float64(steps), -float64(steps)} // max, and -min
	if err := t.pg.AllReduce(comm.Float64s(mm), comm.Max).Wait(ctx); err != nil {
		return false, fmt.Errorf("trainer: comparing the ranks' batch counts: %w", err)
	}
	return mm[0] == -mm[1], nil
}

// Evaluate runs the evaluation set through the model in eval mode without
// recording gradients, prints the loss and accuracy over all ranks on
// rank 0, and returns them ("loss", "acc"). It calls the wrapped module
// directly: DDP's forward would issue collectives, and unpadded shards
// give ranks different batch counts. Each evaluation starts at the
// evaluation set's beginning and reads at most EvalBatches batches per
// rank when that is set.
func (t *Trainer) Evaluate(ctx context.Context, epoch int) (map[string]float64, error) {
	return t.evaluate(ctx, epoch, false)
}

// evaluate is Evaluate; periodic (EvalEvery) names the step in the line
// printed.
func (t *Trainer) evaluate(ctx context.Context, epoch int, periodic bool) (map[string]float64, error) {
	if t.evalData == nil {
		return nil, fmt.Errorf("trainer: Evaluate: no EvalData")
	}
	when := fmt.Sprintf("after epoch %d", epoch)
	if periodic {
		when = fmt.Sprintf("at step %d (epoch %d)", t.step, epoch)
	}
	// A pass cut short by EvalBatches leaves the sampler's position inside
	// the set; the next pass would go on from there and see other samples.
	if r, ok := t.evalData.Sampler().(data.Resumable); ok {
		r.SetPosition(0)
	}
	m := t.model.Module()
	wasTraining := m.Training()
	m.Train(false)
	defer m.Train(wasTraining)
	var loss metrics.Mean
	var acc metrics.Accuracy
	var err error
	nn.NoGrad(m, func() {
		read := 0
		for b, e := range t.evalData.All(ctx) {
			if e != nil {
				err = fmt.Errorf("trainer: evaluation %s: %w", when, e)
				return
			}
			loaded := b
			if b, e = toDevice(b, t.dev); e != nil {
				err = fmt.Errorf("trainer: evaluation %s: %w", when, e)
				return
			}
			out := m.Forward(autograd.Const(b.Inputs))
			loss.Add(t.loss(out, b).Value.Item(), float64(b.Size()))
			if b.Labels != nil && out.Value.Dim() == 2 {
				host, e := out.Value.To(tensor.CPU())
				if e != nil {
					err = fmt.Errorf("trainer: evaluation %s: %w", when, e)
					return
				}
				acc.Add(tensor.ArgMax(host, 1), b.Labels)
			}
			releaseCopies(loaded, b)
			if read++; t.evalBatches > 0 && read >= t.evalBatches {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}
	l, err := loss.Reduce(ctx, t.pg)
	if err != nil {
		return nil, fmt.Errorf("trainer: evaluation %s: %w", when, err)
	}
	a, err := acc.Reduce(ctx, t.pg)
	if err != nil {
		return nil, fmt.Errorf("trainer: evaluation %s: %w", when, err)
	}
	// Accuracy is a classifier's: with no labelled [B, C] output on any
	// rank (a regression, a language model's [B, T, V] logits) the
	// reduced count is 0 and a is NaN, which says nothing: leave it out.
	res, accText := map[string]float64{"loss": l}, ""
	if !math.IsNaN(a) {
		res["acc"], accText = a, fmt.Sprintf(" test_acc=%.4f", a)
	}
	if periodic {
		t.logf("epoch=%d step=%d test_loss=%.4f%s\n", epoch, t.step, l, accText)
	} else {
		t.logf("epoch=%d test_loss=%.4f%s\n", epoch, l, accText)
	}
	if err := t.LogEval(epoch, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Checkpoint returns the training state to save after epoch: model,
// optimizer, the GradScaler's state (with Config.Scaler), the scheduler's
// (with Config.Scheduler), the sampler's position, the epoch and step
// (Train saves rank 0's).
func (t *Trainer) Checkpoint(epoch int) *checkpoint.Checkpoint {
	var st *data.SamplerState
	if t.sampler != nil {
		s := t.sampler.State()
		st = &s
	}
	cfg, _ := json.Marshal(map[string]any{"world_size": t.pg.Size(), "save_every": t.saveEvery})
	return &checkpoint.Checkpoint{Epoch: epoch, Step: t.step,
		Model:     checkpoint.StateDict(t.model.Module()),
		Optimizer: (*checkpoint.OptimizerState)(t.optimizer.StateDict()),
		Sampler:   st, Config: cfg, GradScaler: scalerState(t.scaler), Scheduler: schedulerState(t.sched)}
}

// scalerState is s's state for a checkpoint, nil without a scaler.
func scalerState(s *amp.GradScaler) *checkpoint.GradScalerState {
	if s == nil {
		return nil
	}
	st := checkpoint.GradScalerState(s.State())
	return &st
}

// Scaler is the GradScaler of Config.Scaler, nil without one.
func (t *Trainer) Scaler() *amp.GradScaler { return t.scaler }

// SaveCheckpoint saves from rank 0 into the checkpoint directory while the
// others wait (a no-op without CkptDir).
func (t *Trainer) SaveCheckpoint(ctx context.Context, epoch int) error {
	if t.ckpt == nil {
		return nil
	}
	var c *checkpoint.Checkpoint
	if t.pg.Rank() == 0 {
		c = t.Checkpoint(epoch)
	}
	path, err := checkpoint.SaveOnRank0(ctx, t.pg, t.ckpt, c)
	if err != nil {
		return fmt.Errorf("trainer: save checkpoint at epoch %d: %w", epoch, err)
	}
	t.logf("Epoch %d | Training checkpoint saved at %s\n", epoch, path)
	return nil
}

// Train runs epochs [resumed epoch, maxEpochs): each epoch, then its
// evaluation (with EvalData), then a checkpoint every SaveEvery epochs and
// after the last,
// then the epoch-end hooks; it stops early after an epoch in which a rank
// called Stop.
func (t *Trainer) Train(ctx context.Context, maxEpochs int) error {
	for epoch := t.start; epoch < maxEpochs; epoch++ {
		if err := t.RunEpoch(ctx, epoch); err != nil {
			return err
		}
		if t.evalData != nil {
			res, err := t.Evaluate(ctx, epoch)
			if err != nil {
				return err
			}
			if err := t.hooks.onEval(ctx, t, EvalInfo{Epoch: epoch, Step: t.step, Metrics: res}); err != nil {
				return err
			}
		}
		// The last epoch is saved too, whatever the cadence: a run that
		// finished then resumes into "nothing to do" (Done), instead of
		// repeating the epochs after its last periodic checkpoint.
		last := epoch == maxEpochs-1 || (t.maxSteps > 0 && t.step >= t.maxSteps)
		if t.saveEvery > 0 && (epoch%t.saveEvery == 0 || last) {
			if err := t.SaveCheckpoint(ctx, epoch); err != nil {
				return err
			}
		}
		if err := t.hooks.onEpochEnd(ctx, t, EpochInfo{Epoch: epoch, Step: t.step, Loss: t.mon.lastEpochLoss,
			Elapsed: t.mon.lastEpochTime, Samples: t.mon.lastEpochSamples}); err != nil {
			return err
		}
		if t.maxSteps > 0 && t.step >= t.maxSteps {
			t.logf("Epoch %d | stopping: reached -max-steps %d\n", epoch, t.maxSteps)
			break
		}
		stop, err := t.agree(ctx)
		if err != nil {
			return err
		}
		if stop != "" {
			t.stopped = stop
			t.logf("Epoch %d | stopping early: %s\n", epoch, stop)
			break
		}
	}
	t.logf("host memory: %v\n", tensor.Host().Stats())
	if t.dev != nil {
		if st, ok := tensor.MemoryStatsOf(t.dev); ok {
			t.logf("device memory: %v\n", st)
		}
	}
	// The cached blocks count as live to the garbage collector, whose heap
	// goal would otherwise stay at twice them through what follows Train
	// (evaluation, generation, the final save): hand them back now.
	tensor.EmptyCache(tensor.CPU())
	return nil
}

// Stats reports DDP's overlap statistics.
func (t *Trainer) Stats() ddp.Stats { return t.model.Stats() }
