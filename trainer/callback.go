package trainer

import (
	"context"
	"fmt"
	"time"
)

// A Callback is a value that implements one or more of the hook interfaces
// StepHook, EpochEndHook and EvalHook; Config.Callbacks lists them, and
// New refuses one that implements none.
//
// Why optional interfaces rather than a struct of funcs: most callbacks
// carry state (the best value so far, a patience counter, a progress
// bar's clock), which a type with methods holds naturally; each implements
// only the hooks it needs; and a hook added later is one more interface
// that no existing callback has to learn about, as hashicorp/raft and
// database/sql add capabilities. For a one-off closure, Funcs adapts plain
// functions.
//
// Hooks run on every rank, in the order the callbacks are listed, on the
// training goroutine: a slow hook slows training. A hook's error stops
// training on that rank with the error (the other ranks then fail at
// their next collective, naming it).
type Callback any

// StepHook is called after every optimizer step.
type StepHook interface {
	OnStep(ctx context.Context, t *Trainer, s StepInfo) error
}

// EpochEndHook is called at the end of every epoch, after its evaluation
// and checkpoint.
type EpochEndHook interface {
	OnEpochEnd(ctx context.Context, t *Trainer, e EpochInfo) error
}

// EvalHook is called after every evaluation pass, with results reduced
// over all ranks, so every rank sees the same values.
type EvalHook interface {
	OnEval(ctx context.Context, t *Trainer, e EvalInfo) error
}

// StepInfo describes a finished step.
type StepInfo struct {
	Epoch int
	Step  int // optimizer steps taken so far, over the whole run
	// Index is the step's number in its epoch (from 1), out of Steps.
	Index, Steps int
	// Loss is this rank's loss of the step; RunningLoss its mean over the
	// epoch so far.
	Loss, RunningLoss float64
	Samples           int // this rank's samples in the step
}

// EpochInfo describes a finished epoch.
type EpochInfo struct {
	Epoch int
	Step  int
	// Loss is this rank's mean training loss over the epoch.
	Loss float64
	// Elapsed is the epoch's training time (evaluation excluded).
	Elapsed time.Duration
	// Samples is this rank's sample count in the epoch.
	Samples int
}

// EvalInfo holds an evaluation pass's results ("loss", and "acc" for
// labelled batches), averaged over every rank's samples.
type EvalInfo struct {
	Epoch   int
	Step    int
	Metrics map[string]float64
}

// Funcs adapts plain functions to the hooks; nil fields are skipped.
type Funcs struct {
	Step     func(ctx context.Context, t *Trainer, s StepInfo) error
	EpochEnd func(ctx context.Context, t *Trainer, e EpochInfo) error
	Eval     func(ctx context.Context, t *Trainer, e EvalInfo) error
}

// OnStep implements StepHook.
func (f Funcs) OnStep(ctx context.Context, t *Trainer, s StepInfo) error {
	if f.Step == nil {
		return nil
	}
	return f.Step(ctx, t, s)
}

// OnEpochEnd implements EpochEndHook.
func (f Funcs) OnEpochEnd(ctx context.Context, t *Trainer, e EpochInfo) error {
	if f.EpochEnd == nil {
		return nil
	}
	return f.EpochEnd(ctx, t, e)
}

// OnEval implements EvalHook.
func (f Funcs) OnEval(ctx context.Context, t *Trainer, e EvalInfo) error {
	if f.Eval == nil {
		return nil
	}
	return f.Eval(ctx, t, e)
}

// hooks are the callbacks sorted by the hooks they implement.
type hooks struct {
	step  []StepHook
	epoch []EpochEndHook
	eval  []EvalHook
}

func newHooks(cbs []Callback) (hooks, error) {
	var h hooks
	for i, cb := range cbs {
		ok := false
		if s, is := cb.(StepHook); is {
			h.step, ok = append(h.step, s), true
		}
		if e, is := cb.(EpochEndHook); is {
			h.epoch, ok = append(h.epoch, e), true
		}
		if e, is := cb.(EvalHook); is {
			h.eval, ok = append(h.eval, e), true
		}
		if !ok {
			return h, fmt.Errorf("trainer: Callbacks[%d] (%T) implements none of OnStep, OnEpochEnd, OnEval", i, cb)
		}
	}
	return h, nil
}

func (h hooks) onStep(ctx context.Context, t *Trainer, s StepInfo) error {
	for _, c := range h.step {
		if err := c.OnStep(ctx, t, s); err != nil {
			return fmt.Errorf("trainer: %T.OnStep at step %d: %w", c, s.Step, err)
		}
	}
	return nil
}

func (h hooks) onEpochEnd(ctx context.Context, t *Trainer, e EpochInfo) error {
	for _, c := range h.epoch {
		if err := c.OnEpochEnd(ctx, t, e); err != nil {
			return fmt.Errorf("trainer: %T.OnEpochEnd at epoch %d: %w", c, e.Epoch, err)
		}
	}
	return nil
}

func (h hooks) onEval(ctx context.Context, t *Trainer, e EvalInfo) error {
	for _, c := range h.eval {
		if err := c.OnEval(ctx, t, e); err != nil {
			return fmt.Errorf("trainer: %T.OnEval at epoch %d: %w", c, e.Epoch, err)
		}
	}
	return nil
}
