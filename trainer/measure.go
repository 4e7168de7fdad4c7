package trainer

import (
	"context"
	"time"

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
	}
}

// stopClock ends the epoch's measured stretch.
func (t *Trainer) stopClock() {
	if !t.warm || t.clockStart.IsZero() {
		return
	}
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
