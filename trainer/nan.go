package trainer

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/goddp/goddp/comm"
)

// nonFiniteName is the spelling of a non-finite loss in messages: NaN,
// Inf or -Inf (torch prints nan and inf).
func nonFiniteName(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return "NaN"
}

// reportNonFinite prints, on rank 0, the first step whose loss is NaN or
// infinite: "loss is NaN at step N (epoch E)", once per run, to stderr,
// beside the records that carry the NaN on. The
// other ranks' losses are not looked at: that would take a collective per
// step, and a NaN on any rank reaches every rank's weights through the
// gradients' all-reduce, so rank 0's loss shows it a step later at most.
// TerminateOnNaN looks at every rank.
func (t *Trainer) reportNonFinite(epoch int) {
	m := &t.mon
	if m.nonFiniteSeen || t.pg.Rank() != 0 || !(math.IsNaN(m.lastLoss) || math.IsInf(m.lastLoss, 0)) {
		return
	}
	m.nonFiniteSeen = true
	fmt.Fprintf(os.Stderr, "loss is %s at step %d (epoch %d)\n", nonFiniteName(m.lastLoss), t.step, epoch)
}

// NonFiniteLossError is TerminateOnNaN's error: the first step at which a
// rank's loss was NaN or infinite, and the lowest such rank.
type NonFiniteLossError struct {
	Step, Epoch, Rank int
	Loss              float64
}

func (e *NonFiniteLossError) Error() string {
	return fmt.Sprintf("loss is %s at step %d (epoch %d) on rank %d: stopping (-terminate-on-nan)",
		nonFiniteName(e.Loss), e.Step, e.Epoch, e.Rank)
}

// TerminateOnNaN is a callback that fails the run at the first step whose
// loss is NaN or infinite on any rank, with a *NonFiniteLossError (Keras's
// TerminateOnNaN; Lightning's Trainer(detect_anomaly=True) stops in the
// same way). Main's -terminate-on-nan adds it.
//
// Every rank must stop at the same step, or the others would wait in
// the next step's all-reduce for ranks that left; the loss is each rank's
// own, so each step the ranks all-reduce one flag per rank (which of NaN,
// +Inf, -Inf each saw) and all return the same error. That collective is
// the callback's cost, paid only when it is added.
type TerminateOnNaN struct {
	seen []float64 // one per rank: 0 finite, 1 NaN, 2 +Inf, 3 -Inf
}

// OnStep implements StepHook.
func (c *TerminateOnNaN) OnStep(ctx context.Context, t *Trainer, s StepInfo) error {
	n := t.pg.Size()
	if len(c.seen) != n {
		c.seen = make([]float64, n)
	}
	clear(c.seen)
	switch {
	case math.IsNaN(s.Loss):
		c.seen[t.pg.Rank()] = 1
	case math.IsInf(s.Loss, 1):
		c.seen[t.pg.Rank()] = 2
	case math.IsInf(s.Loss, -1):
		c.seen[t.pg.Rank()] = 3
	}
	if n > 1 {
		if err := t.pg.AllReduce(comm.Float64s(c.seen), comm.Max).Wait(ctx); err != nil {
			return fmt.Errorf("agree on a non-finite loss at step %d: %w", s.Step, err)
		}
	}
	for r, v := range c.seen {
		if v != 0 {
			loss := [...]float64{0, math.NaN(), math.Inf(1), math.Inf(-1)}[int(v)]
			return &NonFiniteLossError{Step: s.Step, Epoch: s.Epoch, Rank: r, Loss: loss}
		}
	}
	return nil
}
