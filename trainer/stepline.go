package trainer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// stepLine is the recipe's progress line, printed by rank 0 every Every
// (Progress's period) as nanoGPT prints its iterations:
//
//	step=120 loss=3.2154 lr=0.0006 grad_norm=0.8123 tokens_per_s=41230.5 mfu=0.3120
//
// loss is the mean over the steps since the last line, lr the next step's,
// grad_norm the last step's before clipping (with ClipNorm), and the rates
// are over the same steps for the whole job: rank 0's samples times the
// world size, as the train records count them, times tokens per sample;
// without tokens per sample, samples_per_s. An evaluation in between
// starts the window again, so that its time is not counted.
type stepLine struct {
	w               io.Writer
	every           time.Duration // 0: 10 s, as Progress; <0: every step
	world           int
	tokensPerSample int
	flopsPerToken   float64
	peak            float64 // per device; 0: unknown, no mfu
	clip            bool
	now             func() time.Time

	start   time.Time
	samples int64
	loss    float64
	steps   int
}

// OnStep implements StepHook.
func (s *stepLine) OnStep(_ context.Context, t *Trainer, info StepInfo) error {
	now := s.now()
	if s.start.IsZero() {
		// The first step's time is not known: the clock starts at its end.
		s.start = now
		return nil
	}
	s.samples += int64(info.Samples)
	s.loss += info.Loss
	s.steps++
	every := s.every
	if every == 0 {
		every = 10 * time.Second
	}
	if every > 0 && now.Sub(s.start) < every {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "step=%d loss=%.4f lr=%.4g", info.Step, s.loss/float64(s.steps), t.LR())
	if s.clip {
		fmt.Fprintf(&b, " grad_norm=%.4f", t.GradNorm())
	}
	sps := 0.0
	if dt := now.Sub(s.start).Seconds(); dt > 0 {
		sps = float64(s.samples) * float64(s.world) / dt
	}
	if s.tokensPerSample > 0 {
		tps := sps * float64(s.tokensPerSample)
		fmt.Fprintf(&b, " tokens_per_s=%.1f", tps)
		if s.flopsPerToken > 0 && s.peak > 0 {
			fmt.Fprintf(&b, " mfu=%.4f", MFU(tps, s.flopsPerToken, s.peak, s.world))
		}
	} else {
		fmt.Fprintf(&b, " samples_per_s=%.1f", sps)
	}
	s.start, s.samples, s.loss, s.steps = now, 0, 0, 0
	_, err := fmt.Fprintln(s.w, b.String())
	return err
}

// OnEval implements EvalHook: the window starts again after an evaluation.
func (s *stepLine) OnEval(context.Context, *Trainer, EvalInfo) error {
	s.start, s.samples, s.loss, s.steps = s.now(), 0, 0, 0
	return nil
}
