package trainer

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/goddp/goddp/comm"
)

// monitor is the trainer's running view of training for the callbacks and
// the loggers: this rank's losses over the current window and epoch, and
// where the window started (time, samples, ddp's communication totals).
// Records are written on rank 0 only.
type monitor struct {
	loggers []Logger
	every   int // steps per train record

	began                time.Time
	lastLoss             float64
	winLoss, epochLoss   float64
	winSteps, epochSteps int
	winSamples           int64
	winStart             time.Time
	winComm, winCommWait time.Duration
	running              float64 // mean loss over the epoch so far

	// nonFiniteSeen: the first NaN or infinite loss was reported
	// (reportNonFinite).
	nonFiniteSeen bool

	// the last finished epoch, for the epoch-end hooks
	lastEpochLoss    float64
	lastEpochTime    time.Duration
	lastEpochSamples int
}

// epochStarted starts the clock of the epoch's first window (and of the
// run, on the first call).
func (m *monitor) epochStarted(now time.Time) {
	if m.began.IsZero() {
		m.began = now
	}
	m.winStart = now
}

func (t *Trainer) emit(r Record) error {
	if t.pg.Rank() != 0 {
		return nil
	}
	for _, l := range t.mon.loggers {
		if err := l.Log(r); err != nil {
			return fmt.Errorf("trainer: %T: %w", l, err)
		}
	}
	return nil
}

// observeStep records one finished step and, on rank 0, writes a train
// record every `every` steps.
func (t *Trainer) observeStep(epoch, samples int) error {
	m := &t.mon
	m.winLoss += m.lastLoss
	m.epochLoss += m.lastLoss
	m.winSteps++
	m.epochSteps++
	m.winSamples += int64(samples)
	m.running = m.epochLoss / float64(m.epochSteps)
	t.reportNonFinite(epoch)
	if t.pg.Rank() != 0 || len(m.loggers) == 0 || m.winSteps < max(m.every, 1) {
		return nil
	}
	return t.flushWindow(epoch, time.Now())
}

// flushWindow writes the current window as a train record and starts a new one.
func (t *Trainer) flushWindow(epoch int, now time.Time) error {
	m := &t.mon
	if m.winSteps == 0 {
		return nil
	}
	st := t.model.Stats().Total
	dComm, dWait := st.Comm-m.winComm, st.CommWait-m.winCommWait
	hidden := 100.0
	if dComm > 0 {
		hidden = 100 * min(max(1-float64(dWait)/float64(dComm), 0), 1)
	}
	sps := 0.0
	if dt := now.Sub(m.winStart).Seconds(); dt > 0 {
		sps = float64(m.winSamples) * float64(t.pg.Size()) / dt
	}
	tps, mfu := t.tokenRates(sps)
	err := t.emit(Record{Kind: KindTrain, Step: t.step, Epoch: epoch,
		Loss: m.winLoss / float64(m.winSteps), LR: t.learningRate(), SamplesPerS: sps,
		AllReduceHiddenPct: hidden, ElapsedS: now.Sub(m.began).Seconds(),
		GradNorm: t.lastNorm, TokensPerS: tps, MFU: mfu})
	m.winLoss, m.winSteps, m.winSamples = 0, 0, 0
	m.winStart, m.winComm, m.winCommWait = now, st.Comm, st.CommWait
	return err
}

// epochMean is this rank's mean training loss over the epoch so far.
func (m *monitor) epochMean() float64 {
	if m.epochSteps == 0 {
		return 0
	}
	return m.epochLoss / float64(m.epochSteps)
}

// endEpochMetrics gathers every rank's communication figures (a
// collective: every rank calls it), flushes the partial window and writes
// the epoch record (rank 0's mean loss over the epoch, cumulative hidden
// share, the ranks' figures).
func (t *Trainer) endEpochMetrics(ctx context.Context, epoch int, elapsed time.Duration, samples int) error {
	m := &t.mon
	m.lastEpochLoss, m.lastEpochTime, m.lastEpochSamples = m.epochMean(), elapsed, samples
	defer func() { m.epochLoss, m.epochSteps = 0, 0 }()
	ranks, err := t.gatherComm(ctx)
	if err != nil {
		return fmt.Errorf("trainer: epoch %d: %w", epoch, err)
	}
	if t.pg.Rank() != 0 || len(m.loggers) == 0 || m.epochSteps == 0 {
		return nil
	}
	now := time.Now()
	if err := t.flushWindow(epoch, now); err != nil {
		return err
	}
	sps := 0.0
	if s := elapsed.Seconds(); s > 0 {
		sps = float64(samples) * float64(t.pg.Size()) / s
	}
	tps, mfu := t.tokenRates(sps)
	return t.emit(Record{Kind: KindEpoch, Step: t.step, Epoch: epoch,
		Loss: m.epochMean(), LR: t.learningRate(), SamplesPerS: sps, TokensPerS: tps, MFU: mfu,
		AllReduceHiddenPct: 100 * t.model.Stats().Total.HiddenFraction(), ElapsedS: now.Sub(m.began).Seconds(),
		Ranks: ranks})
}

// gatherComm all-gathers every rank's DDP communication figures over the
// run so far (ddp.Stats totals), by rank.
func (t *Trainer) gatherComm(ctx context.Context) ([]RankComm, error) {
	const n = 3
	st := t.model.Stats()
	mine := []float64{100 * st.Total.HiddenFraction(), 0, 0}
	if st.Iterations > 0 {
		iters := float64(st.Iterations)
		mine[1] = float64(st.Total.CommWait.Microseconds()) / 1e3 / iters
		mine[2] = float64(st.Total.Comm.Microseconds()) / 1e3 / iters
	}
	all := make([]float64, n*t.pg.Size())
	if err := comm.AllGather(t.pg, comm.Float64s(all), comm.Float64s(mine)).Wait(ctx); err != nil {
		return nil, fmt.Errorf("gather communication figures: %w", err)
	}
	out := make([]RankComm, t.pg.Size())
	for r := range out {
		v := all[n*r : n*r+n]
		out[r] = RankComm{Rank: r, HiddenPct: v[0], WaitMs: v[1], CommMs: v[2]}
	}
	return out, nil
}

// agree tells every rank whether any rank asked to stop (Stop), and why
// (the lowest asking rank's reason), so that all ranks leave after the
// same epoch: an all-reduce of one flag per rank, and a broadcast only
// when one is set.
func (t *Trainer) agree(ctx context.Context) (string, error) {
	asked := make([]float64, t.pg.Size())
	if t.stopReason != "" {
		asked[t.pg.Rank()] = 1
	}
	if err := t.pg.AllReduce(comm.Float64s(asked), comm.Max).Wait(ctx); err != nil {
		return "", fmt.Errorf("trainer: agree on stopping: %w", err)
	}
	for r, a := range asked {
		if a == 0 {
			continue
		}
		reason := t.stopReason
		if err := comm.BroadcastObject(ctx, t.pg, &reason, r); err != nil {
			return "", fmt.Errorf("trainer: agree on stopping: %w", err)
		}
		if r != t.pg.Rank() {
			reason = fmt.Sprintf("rank %d: %s", r, reason)
		}
		return reason, nil
	}
	return "", nil
}

// LogEval writes an eval record with the given results (for example
// {"loss": 0.31, "acc": 0.92}) at the current step; call it on every
// rank after an evaluation pass (rank 0 writes, the others return nil).
// Evaluate reports through it, so its results reach the loggers.
func (t *Trainer) LogEval(epoch int, results map[string]float64) error {
	if t.pg.Rank() != 0 || len(t.mon.loggers) == 0 {
		return nil
	}
	ev := make(map[string]float64, len(results))
	maps.Copy(ev, results)
	var elapsed float64
	if !t.mon.began.IsZero() {
		elapsed = time.Since(t.mon.began).Seconds()
	}
	return t.emit(Record{Kind: KindEval, Step: t.step, Epoch: epoch,
		LR: t.learningRate(), AllReduceHiddenPct: 100 * t.model.Stats().Total.HiddenFraction(),
		ElapsedS: elapsed, Eval: ev})
}

func (t *Trainer) learningRate() float64 {
	if t.stepped {
		return t.stepLR
	}
	return t.groupLR()
}

// groupLR is the first parameter group's learning rate now.
func (t *Trainer) groupLR() float64 {
	if gs := t.optimizer.ParamGroups(); len(gs) > 0 {
		return gs[0].LR
	}
	return 0
}

// RunningLoss is this rank's mean training loss over the current (or last)
// epoch so far; it is what the progress bar shows.
func (t *Trainer) RunningLoss() float64 { return t.mon.running }
