//go:build cgo

package ddp

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/cuda/sim"
)

// deviceGrads trains one step of a 2-rank MLP and returns rank 0's
// reduced gradients; dev, when set, gives each rank a simulated device
// whose compute stream is slowed by delay.
func deviceGrads(t *testing.T, onDevice, skipWait bool, delay time.Duration) [][]float32 {
	grads := make([][][]float32, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet([]int{5, 7, 6, 3}, 1)
		opts := []Option{FirstBucketCapMB(100.0 / (1 << 20)), BucketCapMB(100.0 / (1 << 20))}
		if onDevice {
			dev := sim.New(rank)
			defer dev.Close()
			dev.Compute().SetDelay(delay)
			opts = append(opts, OnDevice(dev.Queues()))
		}
		d, err := Wrap(context.Background(), net, pg, opts...)
		if err != nil {
			return err
		}
		defer d.Close()
		if onDevice {
			if len(d.r.buckets) < 2 {
				return fmt.Errorf("%d buckets, want several", len(d.r.buckets))
			}
			d.r.dev.skipWait = skipWait
		}
		x, y := batch(rank, 0, 4, 5, 3)
		out, err := d.Forward(x)
		if err != nil {
			return err
		}
		if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
			return err
		}
		for _, np := range net.NamedParameters() {
			grads[rank] = append(grads[rank], f32s(np.Param.Grad))
		}
		return nil
	})
	requireNoErrs(t, errs)
	return grads[0]
}

// The bucket's all-reduce must wait for the compute stream's copies into
// the bucket. With the device's compute stream slowed, leaving the wait
// out reduces stale bucket contents (this test's negative half), and with
// it the result equals DDP on the CPU.
func TestDeviceCommWaitsForBucketEvent(t *testing.T) {
	want := deviceGrads(t, false, false, 0)
	got := deviceGrads(t, true, false, 5*time.Millisecond)
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-6, "parameter %d", i)
	}
	stale := deviceGrads(t, true, true, 5*time.Millisecond)
	differs := false
	for i := range want {
		for j := range want[i] {
			if math.Abs(float64(want[i][j]-stale[i][j])) > 1e-4 {
				differs = true
			}
		}
	}
	assert.True(t, differs, "without the wait the comm stream should have reduced stale buckets")
}

// Several iterations on the device, each with a NoSync accumulation step
// before the synchronised one: the same gradients as DDP on the CPU.
func TestDeviceTrainingMatchesCPU(t *testing.T) {
	run := func(onDevice bool) [][]float32 {
		var res [][]float32
		errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
			net := mlpNet([]int{4, 9, 2}, 3)
			var opts []Option
			if onDevice {
				dev := sim.New(rank)
				defer dev.Close()
				opts = append(opts, OnDevice(dev.Queues()))
			}
			d, err := Wrap(context.Background(), net, pg, opts...)
			if err != nil {
				return err
			}
			defer d.Close()
			step := func(i int) error {
				x, y := batch(rank, i, 3, 4, 2)
				out, err := d.Forward(x)
				if err != nil {
					return err
				}
				return autograd.MSELoss(out, y, autograd.ReductionMean).Backward()
			}
			for it := range 3 {
				for _, p := range net.params {
					p.Grad = nil
				}
				if err := d.NoSync(func() error { return step(2 * it) }); err != nil {
					return err
				}
				if err := step(2*it + 1); err != nil {
					return err
				}
				if rank == 0 {
					for _, p := range net.params {
						res = append(res, f32s(p.Grad))
					}
				}
			}
			return nil
		})
		requireNoErrs(t, errs)
		return res
	}
	want, got := run(false), run(true)
	require.Len(t, want, 3*4, "3 iterations of 4 parameters")
	require.Equal(t, len(want), len(got))
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-6, "gradient %d", i)
	}
}

// The overlap bar on the device: with compute delays between layers'
// backward, at least 80% of the all-reduce time is hidden behind backward.
func TestDeviceOverlapHidesCommunication(t *testing.T) {
	const layers = 16
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		sizes := make([]int, layers+1)
		for i := range sizes {
			sizes[i] = 8
		}
		net := mlpNet(sizes, 1)
		net.fwd = func(n *testNet, x *autograd.Variable) *autograd.Variable {
			h := x
			for l := 0; l < len(n.params)/2; l++ {
				h = autograd.Linear(h, n.params[2*l], n.params[2*l+1])
				if l+1 < len(n.params)/2 {
					h = autograd.FromOp(h.Value.Clone(), &slowOp{h, 10 * time.Millisecond})
				}
			}
			return h
		}
		dev := sim.New(rank)
		defer dev.Close()
		const capMB = 288.0 / (1 << 20)
		d, err := Wrap(context.Background(), net, pg, FirstBucketCapMB(capMB), BucketCapMB(capMB), OnDevice(dev.Queues()))
		if err != nil {
			return err
		}
		defer d.Close()
		if got := len(d.Stats().BucketBytes); got != layers {
			return fmt.Errorf("%d buckets, want one per layer (%d)", got, layers)
		}
		for step := 0; step < 2; step++ {
			x, y := batch(rank, step, 4, 8, 8)
			out, err := d.Forward(x)
			if err != nil {
				return err
			}
			if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
				return err
			}
		}
		s := d.Stats()
		h := s.Total.HiddenFraction()
		t.Logf("rank %d on %v: %.1f%% of communication hidden", rank, dev, 100*h)
		if h < 0.8 {
			return fmt.Errorf("hidden %.2f, want >= 0.8 (comm %v, wait %v over %d iterations)", h, s.Total.Comm, s.Total.CommWait, s.Iterations)
		}
		return nil
	}, commtest.WithLatency(2*time.Millisecond))
	requireNoErrs(t, errs)
}

// GradientAsBucketView on device buckets needs the parameters there (a
// host gradient cannot be a view of device memory): Wrap says so.
func TestDeviceRejectsHostViews(t *testing.T) {
	pg := commtest.NewGroups(1)[0]
	dev := sim.New(0)
	defer dev.Close()
	_, err := Wrap(context.Background(), mlpNet([]int{2, 2}, 1), pg, OnDevice(dev.Queues()), GradientAsBucketView(true))
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, `GradientAsBucketView with OnDevice(sim:0) needs the parameters on the device (parameter "0.weight" is on the host)`)
}

// On a device the buckets' collectives wait on comm goroutines beside
// backward, and say so (comm.WaitBeside), as the host reducer's watchers do.
func TestDeviceBucketWaitsBeside(t *testing.T) {
	groups := make([]*besideGroup, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		g := &besideGroup{ProcessGroup: pg}
		groups[rank] = g
		dev := sim.New(rank)
		defer dev.Close()
		net := mlpNet([]int{4, 9, 2}, 3)
		d, err := Wrap(context.Background(), net, g, OnDevice(dev.Queues()))
		if err != nil {
			return err
		}
		defer d.Close()
		g.mu.Lock()
		g.waits = nil // Wrap's own collectives
		g.mu.Unlock()
		x, y := batch(rank, 0, 3, 4, 2)
		out, err := d.Forward(x)
		if err != nil {
			return err
		}
		return autograd.MSELoss(out, y, autograd.ReductionMean).Backward()
	})
	requireNoErrs(t, errs)
	for rank, g := range groups {
		require.NotEmpty(t, g.waits, "rank %d: the buckets' all-reduces", rank)
		for i, beside := range g.waits {
			require.True(t, beside, "rank %d: wait %d", rank, i)
		}
	}
}
