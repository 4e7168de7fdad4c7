package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
)

// Mode says which way a metric improves.
type Mode int

const (
	Min Mode = iota // lower is better (a loss); the zero value
	Max             // higher is better (an accuracy)
)

// better reports whether v improves on best by more than delta.
func (m Mode) better(v, best, delta float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if math.IsNaN(best) {
		return true
	}
	if m == Max {
		return v > best+delta
	}
	return v < best-delta
}

// EarlyStopping stops training when an evaluation metric has not improved
// for Patience evaluations in a row, as Keras' and Lightning's
// EarlyStopping do. Evaluation results are reduced over the ranks, so
// every rank counts the same and they stop after the same epoch (Trainer.Stop).
type EarlyStopping struct {
	Metric   string  // a key of EvalInfo.Metrics, e.g. "loss" or "acc"
	Mode     Mode    // Min (default) or Max
	Patience int     // evaluations without improvement before stopping; 0 means 1
	MinDelta float64 // an improvement smaller than this does not count

	best  float64
	bad   int
	valid bool
}

// OnEval implements EvalHook.
func (e *EarlyStopping) OnEval(_ context.Context, t *Trainer, ev EvalInfo) error {
	v, ok := ev.Metrics[e.Metric]
	if !ok {
		return fmt.Errorf("trainer: early stopping: the evaluation has no %q (it has %v)", e.Metric, keys(ev.Metrics))
	}
	if !e.valid {
		e.best, e.valid = math.NaN(), true
	}
	if e.Mode.better(v, e.best, e.MinDelta) {
		e.best, e.bad = v, 0
		return nil
	}
	e.bad++
	if e.bad >= max(e.Patience, 1) {
		t.Stop(fmt.Sprintf("eval %s has not improved on %.6g for %d evaluations", e.Metric, e.best, e.bad))
	}
	return nil
}

// KeepBest saves a checkpoint to Path each time an evaluation metric
// improves on the best so far, so Path always holds the best model by that
// metric. Rank 0 writes it (atomically, as every checkpoint); the others
// only keep count. The file's Config records the metric and its value, and
// a KeepBest that finds the file at its first evaluation (a resumed run)
// starts from that value instead of overwriting a better model with a
// worse one.
type KeepBest struct {
	Metric string // a key of EvalInfo.Metrics, e.g. "loss" or "acc"
	Mode   Mode   // Min (default) or Max
	Path   string // the checkpoint file, e.g. "checkpoints/best.safetensors"

	best   float64
	loaded bool
}

// bestConfig is what KeepBest stores in the checkpoint's Config.
type bestConfig struct {
	Metric string  `json:"best_metric"`
	Value  float64 `json:"best_value"`
}

// Best returns the best value seen so far (NaN before the first evaluation).
func (k *KeepBest) Best() float64 {
	if !k.loaded {
		return math.NaN()
	}
	return k.best
}

// OnEval implements EvalHook.
func (k *KeepBest) OnEval(ctx context.Context, t *Trainer, ev EvalInfo) error {
	v, ok := ev.Metrics[k.Metric]
	if !ok {
		return fmt.Errorf("trainer: keep best: the evaluation has no %q (it has %v)", k.Metric, keys(ev.Metrics))
	}
	if !k.loaded {
		k.best, k.loaded = math.NaN(), true
		if err := k.readPrevious(ctx, t); err != nil {
			return err
		}
	}
	if !k.Mode.better(v, k.best, 0) {
		return nil
	}
	k.best = v
	if t.Rank() != 0 {
		return nil
	}
	c := t.Checkpoint(ev.Epoch)
	c.Config, _ = json.Marshal(bestConfig{Metric: k.Metric, Value: v})
	if err := checkpoint.Save(k.Path, c); err != nil {
		return fmt.Errorf("trainer: keep best: %w", err)
	}
	t.logf("Epoch %d | best %s=%.6g saved at %s\n", ev.Epoch, k.Metric, v, k.Path)
	return nil
}

// readPrevious starts from the value stored in an existing file. Rank 0
// reads it and tells the others, so that all keep the same count, or all
// fail together.
func (k *KeepBest) readPrevious(ctx context.Context, t *Trainer) error {
	var msg struct {
		Value float64
		Err   string
	}
	msg.Value = math.NaN()
	var err error
	if t.Rank() == 0 {
		var c *checkpoint.Checkpoint
		c, err = checkpoint.Load(k.Path)
		var bc bestConfig
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = nil
		case err != nil:
			err = fmt.Errorf("trainer: keep best: %s exists but does not load (move it away to start over): %w", k.Path, err)
		case json.Unmarshal(c.Config, &bc) == nil && bc.Metric == k.Metric:
			msg.Value = bc.Value
		default:
			err = fmt.Errorf("trainer: keep best: %s holds no best %q; refusing to overwrite it", k.Path, k.Metric)
		}
		if err != nil {
			msg.Err = err.Error()
		}
	}
	if berr := comm.BroadcastObject(ctx, t.pg, &msg, 0); berr != nil {
		return fmt.Errorf("trainer: keep best: %w", berr)
	}
	if err != nil {
		return err
	}
	if msg.Err != "" {
		return fmt.Errorf("trainer: keep best: rank 0: %s", msg.Err)
	}
	k.best = msg.Value
	return nil
}

func keys(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }
