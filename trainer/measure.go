package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/goddp/goddp/tensor"

	"github.com/goddp/goddp/comm"
)

// Throughput. The first steps of a run are slower than the rest: the host
// allocator's cache is empty, the backend opens its connections and
// segments on the first collectives, the thread pool starts, and DDP
// rebuilds its buckets from the order gradients arrived in after the first
// iteration, so the second step is the first with the final buckets.
// Counting them would understate the steady rate, most on short runs.
// Dropping the whole first epoch, as this package once did, left
// `-epochs 1` with nothing measured (samples_per_s=0) and threw away most
// of a short run. So the clock starts after the first warmupSteps steps of
// the first epoch this Trainer runs, and runs through every later epoch
// (their evaluation and checkpoints excluded). An epoch too short to spare
// them keeps at least half its steps measured; a one-step epoch is
// measured whole, warm-up included, since nothing else is left to measure.
const warmupSteps = 3

// epochClock is called at the start of each epoch of steps steps.
func (t *Trainer) epochClock(steps int) {
	if !t.warm && t.warmSkip < 0 {
		t.warmSkip = min(warmupSteps, steps/2)
		t.warm = t.warmSkip == 0
	}
	if t.warm {
		t.clockStart, t.clockN = time.Now(), 0
		t.startKernels()
	}
}

// stepClock is called after step i (from 1) of an epoch, of n samples.
func (t *Trainer) stepClock(i, n int) {
	if t.warm {
		t.clockN += int64(n)
		return
	}
	if i >= t.warmSkip {
		t.warm = true
		t.clockStart, t.clockN = time.Now(), 0
		t.startKernels()
	}
}

// stopClock ends the epoch's measured stretch.
func (t *Trainer) stopClock() {
	if !t.warm || t.clockStart.IsZero() {
		return
	}
	t.stopKernels()
	t.measured += time.Since(t.clockStart)
	t.samples += t.clockN
	t.clockStart, t.clockN = time.Time{}, 0
}

// SamplesPerSecond returns the throughput over all ranks once the warm-up
// steps were done: the ranks' sample counts summed, over the slowest
// rank's time. Every rank must call it (it all-reduces).
func (t *Trainer) SamplesPerSecond(ctx context.Context) (float64, error) {
	v := []float64{float64(t.samples)}
	if err := t.pg.AllReduce(comm.Float64s(v), comm.Sum).Wait(ctx); err != nil {
		return 0, err
	}
	secs := []float64{t.measured.Seconds()}
	if err := t.pg.AllReduce(comm.Float64s(secs), comm.Max).Wait(ctx); err != nil {
		return 0, err
	}
	if secs[0] == 0 {
		return 0, nil
	}
	return v[0] / secs[0], nil
}

// startKernels starts the kernel profile, if any, with the clock. Another
// profile recording in the process (ErrProfiling) leaves this one empty for
// the stretch; KernelReport then shows less kernel time, never a wrong rate.
func (t *Trainer) startKernels() {
	if t.kprof == nil || t.kprofStop != nil {
		return
	}
	if stop, err := t.kprof.Start(); err == nil {
		t.kprofStop = stop
	}
}

func (t *Trainer) stopKernels() {
	if t.kprofStop != nil {
		t.kprofStop()
		t.kprofStop = nil
	}
}

// KernelReport is the kernels' share of the measured steps, over all ranks.
type KernelReport struct {
	Ranks       int
	Measured    time.Duration       // the slowest rank's measured time (samples_per_s's)
	KernelTime  time.Duration       // the ranks' kernel time, summed
	KernelFLOPs float64             // the ranks' kernel work, summed
	Kernels     []tensor.KernelStat // this rank's, the most time-consuming first
}

// KernelGFLOPS is the kernels' own rate for the whole job: each rank's
// kernel work over its kernel time, summed over the ranks (ranks run side
// by side, so their rates add). It is what the steps would reach if
// nothing but the kernels took time.
func (r KernelReport) KernelGFLOPS() float64 {
	if r.KernelTime <= 0 {
		return 0
	}
	return r.KernelFLOPs / (r.KernelTime.Seconds() / float64(r.Ranks)) / 1e9
}

// StepGFLOPS is the kernels' work over the measured time, for the whole job.
func (r KernelReport) StepGFLOPS() float64 {
	if r.Measured <= 0 {
		return 0
	}
	return r.KernelFLOPs / r.Measured.Seconds() / 1e9
}

// KernelFraction is the share of the ranks' measured time spent in kernels.
func (r KernelReport) KernelFraction() float64 {
	if r.Measured <= 0 {
		return 0
	}
	return r.KernelTime.Seconds() / (r.Measured.Seconds() * float64(r.Ranks))
}

// KernelReport gathers Config.KernelProfile's figures from every rank (all
// ranks must call it: it all-reduces); Kernels lists this rank's own. It
// fails when the Trainer has no KernelProfile.
func (t *Trainer) KernelReport(ctx context.Context) (KernelReport, error) {
	if t.kprof == nil {
		return KernelReport{}, fmt.Errorf("trainer: KernelReport: Config.KernelProfile is nil")
	}
	t.stopKernels()
	tot := t.kprof.Total()
	sums := []float64{tot.Time.Seconds(), tot.FLOPs}
	if err := t.pg.AllReduce(comm.Float64s(sums), comm.Sum).Wait(ctx); err != nil {
		return KernelReport{}, fmt.Errorf("trainer: KernelReport: %w", err)
	}
	secs := []float64{t.measured.Seconds()}
	if err := t.pg.AllReduce(comm.Float64s(secs), comm.Max).Wait(ctx); err != nil {
		return KernelReport{}, fmt.Errorf("trainer: KernelReport: %w", err)
	}
	r := KernelReport{Ranks: t.pg.Size(), Measured: time.Duration(secs[0] * float64(time.Second)),
		KernelTime: time.Duration(sums[0] * float64(time.Second)), KernelFLOPs: sums[1], Kernels: t.kprof.Stats()}
	return r, nil
}
