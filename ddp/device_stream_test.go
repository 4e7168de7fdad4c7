//go:build cgo

package ddp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

var simTrace = flag.String("ddp.sim-trace", "", "write TestDeviceStreamOrderedFinalize's per-stream timeline of both ranks to this file (Chrome trace JSON: chrome://tracing, ui.perfetto.dev)")

// streamRun is what one run of streamSteps gives back.
type streamRun struct {
	params [][]float32  // rank 0's parameters after the last step
	traces []*sim.Trace // per rank, the traced step's (stream-ordered runs)
	marks  [][]sim.TraceSpan
}

// streamSteps trains the 2-rank MLP on simulated devices, with the group
// reducing device memory (sim.Collectives, NCCL's stand-in), for three
// synchronised steps of Forward, Backward and an SGD step. hostWait puts
// the buckets on the host-waited path. Otherwise the second step is
// traced: after its Forward the group's stream is held shut (a gate: no
// all-reduce can run) until Backward has returned and the optimizer step
// is queued, so a Backward that waited on the host for an all-reduce
// could not return (it would fail with the timeout instead).
func streamSteps(t *testing.T, hostWait bool, extra ...Option) streamRun {
	t.Helper()
	var mu sync.Mutex
	run := streamRun{traces: make([]*sim.Trace, 2)}
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		dev := sim.New(rank)
		defer dev.Close()
		net := mlpNet([]int{5, 7, 6, 3}, 1)
		if err := nn.To(net, dev.Tensors()); err != nil {
			return err
		}
		col := sim.NewCollectives(pg, dev, time.Minute)
		opts := append([]Option{FirstBucketCapMB(100.0 / (1 << 20)), BucketCapMB(100.0 / (1 << 20)), Timeout(20 * time.Second)}, extra...)
		d, err := Wrap(context.Background(), net, col, opts...)
		if err != nil {
			return err
		}
		defer d.Close()
		d.r.dev.hostWait = hostWait
		opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		if err != nil {
			return err
		}
		for it := range 3 {
			traced := it == 1 && !hostWait
			x, y := batch(rank, it, 4, 5, 3)
			opt.ZeroGrad()
			out, err := d.Forward(autograd.Const(x.Value.MustTo(dev.Tensors())))
			if err != nil {
				return err
			}
			loss := autograd.MSELoss(out, autograd.Const(y.Value.MustTo(dev.Tensors())), autograd.ReductionMean)
			var tr *sim.Trace
			gate := make(chan struct{})
			var openOnce sync.Once
			open := func() { openOnce.Do(func() { close(gate) }) }
			if traced {
				tr = dev.StartTrace()
				col.Stream().Enqueue("gate", func() error { <-gate; return nil })
				// Never hang: a Backward that blocks on the gate fails
				// with the DDP timeout; this opens the gate after it.
				guard := time.AfterFunc(40*time.Second, open)
				defer guard.Stop()
				defer open()
			}
			if err := loss.Backward(); err != nil {
				return fmt.Errorf("step %d: %w", it, err)
			}
			if traced {
				tr.Mark("backward returned")
				dev.Compute().Enqueue("optimizer step begins", func() error { return nil })
			}
			if err := opt.Step(); err != nil {
				return err
			}
			if traced {
				tr.Mark("optimizer step queued")
				open()
			}
			if err := dev.Synchronize(); err != nil {
				return err
			}
			if traced {
				dev.StopTrace()
				mu.Lock()
				run.traces[rank] = tr
				mu.Unlock()
			}
			for i, b := range d.r.buckets {
				if d.r.dev.streamed[i] == hostWait {
					return fmt.Errorf("bucket %d stream-ordered: %v, want %v", b.index, d.r.dev.streamed[i], !hostWait)
				}
			}
			if want := map[bool]string{false: "device, stream-ordered", true: "device"}[hostWait]; d.Stats().Reduction != want {
				return fmt.Errorf("Stats().Reduction %q, want %q", d.Stats().Reduction, want)
			}
			if len(d.r.buckets) < 3 {
				return fmt.Errorf("%d buckets, want several", len(d.r.buckets))
			}
		}
		if rank == 0 {
			for _, p := range net.params {
				g, err := p.Value.To(tensor.CPU())
				if err != nil {
					return err
				}
				run.params = append(run.params, f32s(g))
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
	return run
}

// Stream-ordered gradient sync on sim at world 2: finalize queues the
// compute stream's waits for the buckets' all-reduces and returns, and
// the optimizer's kernels run after the last all-reduce, on the device's
// order alone. The group's stream is held shut until Backward has
// returned and the optimizer step is queued: Backward returning at all,
// and its mark preceding every all-reduce in the timeline, shows that
// finalize did not wait on the host (the host-waited path times out
// there). The parameters after three steps equal the host-waited path's
// bit for bit, with plain buckets, with GradientAsBucketView and with
// fp16 compression (narrowed and widened on the comm stream around the
// group's all-reduce).
func TestDeviceStreamOrderedFinalize(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"buckets", nil},
		{"bucket view", []Option{GradientAsBucketView(true)}},
		{"fp16 compression", []Option{WithCommHook(FP16CompressHook())}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := streamSteps(t, false, c.opts...)
			want := streamSteps(t, true, c.opts...)
			require.Equal(t, want.params, got.params, "stream-ordered and host-waited paths differ")
			checkTimeline(t, got.traces)
			if *simTrace != "" && c.opts == nil {
				f, err := os.Create(*simTrace)
				require.NoError(t, err)
				require.NoError(t, sim.WriteChromeRanks(f, map[int]*sim.Trace{0: got.traces[0], 1: got.traces[1]}))
				require.NoError(t, f.Close())
				t.Logf("timeline: %s", *simTrace)
			}
		})
	}
}

// checkTimeline asserts, for each rank's traced step, that Backward
// returned and the optimizer step was queued before any all-reduce began,
// and that the optimizer's kernels started after the last one ended.
func checkTimeline(t *testing.T, traces []*sim.Trace) {
	t.Helper()
	for rank, tr := range traces {
		require.NotNil(t, tr, "rank %d", rank)
		spans := tr.Spans()
		at := func(stream, op string) []sim.TraceSpan {
			var out []sim.TraceSpan
			for _, s := range spans {
				if s.Stream == stream && s.Op == op {
					out = append(out, s)
				}
			}
			return out
		}
		bwd, queued := at("host", "backward returned"), at("host", "optimizer step queued")
		require.Len(t, bwd, 1)
		require.Len(t, queued, 1)
		ars := at("collectives", "all-reduce")
		require.GreaterOrEqual(t, len(ars), 3, "rank %d: the traced step's bucket all-reduces", rank)
		for i, a := range ars {
			// (a) finalize returned, and the step was queued, before any
			// all-reduce of the step began.
			require.True(t, queued[0].Start.Before(a.Start), "rank %d: all-reduce %d began before the optimizer step was queued", rank, i)
			require.True(t, bwd[0].Start.Before(a.Start), "rank %d: all-reduce %d began before Backward returned", rank, i)
		}
		last := slices.MaxFunc(ars, func(a, b sim.TraceSpan) int { return a.End.Compare(b.End) })
		begins := at("compute", "optimizer step begins")
		require.Len(t, begins, 1)
		// (b) the optimizer's kernels on the compute stream start after
		// the last bucket's all-reduce ends.
		kernels := 0
		for _, s := range spans {
			if s.Stream != "compute" || s.Start.Before(begins[0].Start) || !strings.HasPrefix(s.Op, "launch ") {
				continue
			}
			kernels++
			require.False(t, s.Start.Before(last.End), "rank %d: optimizer kernel %q started before the last all-reduce ended", rank, s.Op)
		}
		require.Positive(t, kernels, "rank %d: no optimizer kernel traced", rank)
	}
}

// stuckGroup never completes its nth AllReduce (counting from 0) on rank
// stuckRank (a peer that never reaches the collective), or, with fail,
// fails it at once without reaching the peers.
type stuckGroup struct {
	comm.ProcessGroup
	stuckRank, nth int
	fail           bool
	mu             sync.Mutex
	calls          int
}

func (g *stuckGroup) AllReduce(buf comm.Buffer, op comm.ReduceOp) comm.Work {
	g.mu.Lock()
	n := g.calls
	g.calls++
	g.mu.Unlock()
	if g.Rank() == g.stuckRank && n == g.nth {
		if g.fail {
			return backend.FailedFuture(errors.New("injected failure"))
		}
		return neverWork{}
	}
	return g.ProcessGroup.AllReduce(buf, op)
}

// neverWork ends only with its caller's context.
type neverWork struct{}

func (neverWork) Wait(ctx context.Context) error {
	<-ctx.Done()
	return fmt.Errorf("%w: %w", comm.ErrTimeout, ctx.Err())
}
func (neverWork) IsCompleted() bool { return false }

// One rank's all-reduce of bucket 1 never completes. Backward still
// returns (finalize does not wait), the watchdog notices the bucket
// outliving the 100 ms timeout, aborts the group (so the device's
// streams drain) and fails the reducer with an error naming the bucket
// and the rank; the next Forward returns it. With the watchdog disabled
// nothing reports it: the group's own bound (1 s here, 10 minutes by
// default) only fails an op nobody looks at.
func TestDeviceWatchdogReportsStuckAllReduce(t *testing.T) {
	errs := stuckRun(t, true, false)
	for rank, err := range errs {
		require.Error(t, err, "rank %d", rank)
		require.ErrorIs(t, err, ErrTimeout, "rank %d", rank)
		require.Contains(t, err.Error(), fmt.Sprintf("ddp: bucket 1 all-reduce on rank %d did not complete within 100ms", rank))
	}
	for rank, err := range stuckRun(t, false, false) {
		require.ErrorContains(t, err, "no error reported", "rank %d: without the watchdog", rank)
	}
}

// A bucket's all-reduce that fails (rather than hangs) on rank 1 is
// reported there as a failure of that bucket on that rank; rank 0, whose
// all-reduce of it never finds its peer, reports the timeout.
func TestDeviceWatchdogReportsFailedAllReduce(t *testing.T) {
	errs := stuckRun(t, true, true)
	require.ErrorContains(t, errs[1], "ddp: bucket 1 all-reduce (")
	require.ErrorContains(t, errs[1], "on rank 1 failed")
	require.ErrorContains(t, errs[1], "injected failure")
	require.ErrorIs(t, errs[0], ErrTimeout)
	require.ErrorContains(t, errs[0], "ddp: bucket 1 all-reduce on rank 0 did not complete within 100ms")
}

// stuckRun runs two steps of the device MLP at world 2 whose bucket 1
// all-reduce never completes on rank 1 (the second device all-reduce of
// the group after Wrap's host ones) and returns, per rank, the error the
// next Forward gave, or one saying that none was reported within 2 s (twice the group's own bound).
func stuckRun(t *testing.T, watchdog, fail bool) []error {
	t.Helper()
	out := make([]error, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		dev := sim.New(rank)
		defer dev.Close()
		net := mlpNet([]int{5, 7, 6, 3}, 1)
		if err := nn.To(net, dev.Tensors()); err != nil {
			return err
		}
		stuck := &stuckGroup{ProcessGroup: pg, stuckRank: 1, nth: -1, fail: fail}
		col := sim.NewCollectives(stuck, dev, time.Second)
		d, err := Wrap(context.Background(), net, col, FirstBucketCapMB(100.0/(1<<20)), BucketCapMB(100.0/(1<<20)),
			Timeout(100*time.Millisecond))
		if err != nil {
			return err
		}
		defer d.Close()
		stuck.mu.Lock()
		stuck.nth = stuck.calls + 1 // bucket 1 of the next backward
		stuck.mu.Unlock()
		x, y := batch(rank, 0, 4, 5, 3)
		fwd := func() (*autograd.Variable, error) {
			return d.Forward(autograd.Const(x.Value.MustTo(dev.Tensors())))
		}
		o, err := fwd()
		if err != nil {
			return err
		}
		if !watchdog {
			d.r.wd = newWatchdog(col, d.cfg.timeout, nil)
			d.r.wd.close() // watches nothing
		}
		if err := autograd.MSELoss(o, autograd.Const(y.Value.MustTo(dev.Tensors())), autograd.ReductionMean).Backward(); err != nil {
			return fmt.Errorf("backward returned an error: %w", err)
		}
		if !d.r.dev.streamed[1] {
			return errors.New("bucket 1 was not stream-ordered")
		}
		select {
		case <-d.r.wd.failed:
		case <-time.After(2 * time.Second):
			out[rank] = errors.New("no error reported within 2s")
			return nil
		}
		_, out[rank] = fwd()
		return nil
	})
	requireNoErrs(t, errs)
	return out
}
