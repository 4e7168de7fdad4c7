package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/optim"
)

// The training recipe: gradient accumulation, clipping, a learning-rate
// schedule and periodic evaluation (Config.GradAccum, ClipNorm, Scheduler,
// EvalEvery, EvalBatches), for every model. Main's flags build them.

// checkRecipe refuses a recipe the Config cannot run.
func (c *Config) checkRecipe() error {
	switch {
	case c.GradAccum < 0:
		return fmt.Errorf("trainer: GradAccum %d < 0", c.GradAccum)
	case c.ClipNorm < 0:
		return fmt.Errorf("trainer: ClipNorm %v < 0", c.ClipNorm)
	case c.EvalEvery < 0 || c.EvalBatches < 0:
		return fmt.Errorf("trainer: EvalEvery %d and EvalBatches %d must not be negative", c.EvalEvery, c.EvalBatches)
	case c.Step != nil && (c.GradAccum > 1 || c.ClipNorm > 0):
		return fmt.Errorf("trainer: Config has Step with GradAccum %d or ClipNorm %v: accumulation and clipping run in the built-in step, and a custom Step computes its own gradients",
			c.GradAccum, c.ClipNorm)
	case c.EvalEvery > 0 && c.EvalData == nil:
		return fmt.Errorf("trainer: EvalEvery %d needs EvalData", c.EvalEvery)
	}
	return nil
}

// GradNorm is the gradients' global L2 norm at the last optimizer step,
// before clipping (what clip_grad_norm_ returns); 0 without ClipNorm.
func (t *Trainer) GradNorm() float64 { return t.lastNorm }

// LR is the first parameter group's learning rate, the one the next
// optimizer step uses (records and step lines show the one the last step
// used).
func (t *Trainer) LR() float64 { return t.groupLR() }

// schedulerState is s's state for a checkpoint, nil without a scheduler.
func schedulerState(s optim.Scheduler) *checkpoint.OptimizerState {
	if s == nil {
		return nil
	}
	return (*checkpoint.OptimizerState)(s.StateDict())
}

// resumeScheduler restores the scheduler's position (torch's
// scheduler.load_state_dict: the saved step count and hyperparameters win
// over this run's). The learning rate of the next step came back with the
// optimizer's state. A checkpoint without scheduler state, or a scheduler
// state with no scheduler to take it, is said and otherwise ignored, as
// the GradScaler's.
func (t *Trainer) resumeScheduler(c *checkpoint.Checkpoint) error {
	switch {
	case t.sched != nil && c.Scheduler != nil:
		if err := t.sched.LoadStateDict((*optim.StateDict)(c.Scheduler)); err != nil {
			return fmt.Errorf("trainer: resume scheduler: %w", err)
		}
	case t.sched != nil:
		t.logf("Resume: the checkpoint has no scheduler state; the schedule starts again at its step 0\n")
	case c.Scheduler != nil:
		t.logf("Resume: the checkpoint's %s state is unused: this run has no scheduler\n", c.Scheduler.Kind)
	}
	return nil
}

// periodicEval is EvalEvery's evaluation, between two steps of an epoch.
// Its time is kept out of samples_per_s and of the records' throughput.
func (t *Trainer) periodicEval(ctx context.Context, epoch int) error {
	if !t.evenEpoch {
		if !t.unevenSaid {
			t.unevenSaid = true
			t.logf("Epoch %d | step %d: no evaluation within epochs whose ranks have uneven batch counts; the epoch's own runs at its end\n", epoch, t.step)
		}
		return nil
	}
	began := time.Now()
	running := t.warm && !t.clockStart.IsZero()
	t.stopClock()
	res, err := t.evaluate(ctx, epoch, true)
	if err != nil {
		return err
	}
	if err := t.hooks.onEval(ctx, t, EvalInfo{Epoch: epoch, Step: t.step, Metrics: res}); err != nil {
		return err
	}
	if running {
		t.clockStart, t.clockN = time.Now(), 0
		t.startKernels()
	}
	t.mon.winStart = t.mon.winStart.Add(time.Since(began))
	return nil
}

// tokenRates are the records' tokens_per_s and mfu for a throughput of
// sps samples a second over all ranks (0 where the Config leaves them
// unknown).
func (t *Trainer) tokenRates(sps float64) (tps, mfu float64) {
	if t.tokensPerSample <= 0 {
		return 0, 0
	}
	tps = sps * float64(t.tokensPerSample)
	if t.flopsPerToken > 0 && t.peak > 0 {
		mfu = MFU(tps, t.flopsPerToken, t.peak, t.pg.Size())
	}
	return tps, mfu
}
