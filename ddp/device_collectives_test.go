//go:build cgo

package ddp

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// deviceCase is one way of training the 2-rank test MLP.
type deviceCase struct {
	device           bool          // buckets on a simulated device
	onDevice         bool          // the model itself on the device (nn.To)
	collectives      bool          // the group reduces device memory (sim.Collectives, NCCL's stand-in)
	hook             CommHook      // a comm hook
	views            bool          // GradientAsBucketView
	findUnused       bool          // FindUnusedParameters
	compressOnDevice bool          // the hook is fp16/bf16 compression, which reduces device memory with collectives
	delay            time.Duration // compute stream delay
	rank0Only        bool          // delay only rank 0's compute stream
	commDelay        time.Duration // the group's stream delay
	skipWait         bool
	skipDone         bool
	steps            int
}

// trainCase runs c.steps synchronised steps (each after a NoSync one) and
// returns rank 0's reduced gradients after each step, on the host.
func trainCase(t *testing.T, c deviceCase) [][]float32 {
	t.Helper()
	steps := max(c.steps, 1)
	var res [][]float32
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet([]int{5, 7, 6, 3}, 1)
		opts := []Option{FirstBucketCapMB(100.0 / (1 << 20)), BucketCapMB(100.0 / (1 << 20))}
		var dev *sim.Device
		if c.device {
			dev = sim.New(rank)
			defer dev.Close()
			if !c.rank0Only || rank == 0 {
				dev.Compute().SetDelay(c.delay)
			}
			opts = append(opts, OnDevice(dev.Queues()))
			if c.onDevice {
				if err := nn.To(net, dev.Tensors()); err != nil {
					return err
				}
			}
			if c.collectives {
				col := sim.NewCollectives(pg, dev, time.Minute)
				col.Stream().SetDelay(c.commDelay)
				pg = col
			}
		}
		if c.hook != nil {
			opts = append(opts, WithCommHook(c.hook))
		}
		if c.views {
			opts = append(opts, GradientAsBucketView(true))
		}
		if c.findUnused {
			opts = append(opts, FindUnusedParameters(true))
		}
		d, err := Wrap(context.Background(), net, pg, opts...)
		if err != nil {
			return err
		}
		defer d.Close()
		if c.device {
			d.r.dev.skipWait, d.r.dev.skipDone = c.skipWait, c.skipDone
		}
		step := func(i int) error {
			x, y := batch(rank, i, 4, 5, 3)
			if c.onDevice {
				x = autograd.Const(x.Value.MustTo(dev.Tensors()))
				y = autograd.Const(y.Value.MustTo(dev.Tensors()))
			}
			out, err := d.Forward(x)
			if err != nil {
				return err
			}
			return autograd.MSELoss(out, y, autograd.ReductionMean).Backward()
		}
		for it := range steps {
			if !c.views {
				for _, p := range net.params {
					p.Grad = nil
				}
			}
			if err := d.NoSync(func() error { return step(2 * it) }); err != nil {
				return err
			}
			if err := step(2*it + 1); err != nil {
				return err
			}
			if c.device {
				for i, b := range d.r.buckets {
					if got := d.r.dev.direct[i]; got != (c.collectives && (c.hook == nil || c.compressOnDevice)) {
						return fmt.Errorf("bucket %d reduced in device memory: %v", b.index, got)
					}
				}
			}
			if rank == 0 {
				for _, np := range net.NamedParameters() {
					g, err := np.Param.Grad.To(tensor.CPU())
					if err != nil {
						return err
					}
					if c.onDevice && g == np.Param.Grad {
						return fmt.Errorf("%s's gradient is on the host", np.Name)
					}
					res = append(res, f32s(g))
				}
			}
			if c.views {
				// The next iteration accumulates into the views: zero them,
				// as optimizer.ZeroGrad(set_to_none=False) does.
				for _, p := range net.params {
					tensor.Fill(p.Grad, 0)
				}
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
	return res
}

func maxDiff(a, b [][]float32) float64 {
	m := 0.0
	for i := range a {
		for j := range a[i] {
			m = max(m, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return m
}

// With a group that reduces device memory (NCCL's shape), each bucket is
// all-reduced in place on the group's own stream: the group's stream waits
// for the bucket's gradients (through the comm stream's wait on the
// bucket's event), and the comm stream waits for the group's completion
// before the compute stream copies the result out. Each wait is shown
// necessary by slowing the stream it orders against: without it, stale
// data is reduced or copied out.
func TestDeviceCollectivesOrdering(t *testing.T) {
	want := trainCase(t, deviceCase{steps: 2})
	for _, onDevice := range []bool{false, true} {
		got := trainCase(t, deviceCase{device: true, onDevice: onDevice, collectives: true, steps: 2,
			delay: 2 * time.Millisecond, commDelay: 2 * time.Millisecond})
		require.Equal(t, len(want), len(got))
		assert.Less(t, maxDiff(want, got), 1e-6, "model on the device: %v", onDevice)
	}
	stale := trainCase(t, deviceCase{device: true, collectives: true, delay: 5 * time.Millisecond, skipWait: true})
	assert.Greater(t, maxDiff(want[:len(stale)], stale), 1e-4, "without the wait on the bucket's event the group should reduce stale buckets")
	early := trainCase(t, deviceCase{device: true, collectives: true, commDelay: 5 * time.Millisecond, skipDone: true})
	assert.Greater(t, maxDiff(want[:len(early)], early), 1e-4, "without the wait on the group's completion the result should be copied out before the reduction")
}

// Comm hooks on a device: fp16 and bf16 compression give exactly what they
// give on the CPU, staged through host memory (tcp, shm, in-memory groups)
// or, with a group that reduces device memory, narrowed and widened by the
// cast kernels around a 16-bit all-reduce on the device.
func TestDeviceCommHooksMatchCPU(t *testing.T) {
	for _, h := range []struct {
		name string
		hook CommHook
	}{{"fp16", FP16CompressHook()}, {"bf16", BF16CompressHook()}} {
		t.Run(h.name, func(t *testing.T) {
			want := trainCase(t, deviceCase{hook: h.hook, steps: 2})
			plain := trainCase(t, deviceCase{steps: 2})
			require.Greater(t, maxDiff(want, plain), 0.0, "the hook should round")
			for _, c := range []deviceCase{
				{device: true, hook: h.hook, steps: 2, delay: time.Millisecond},
				{device: true, onDevice: true, hook: h.hook, steps: 2, delay: time.Millisecond},
				{device: true, onDevice: true, collectives: true, hook: h.hook, compressOnDevice: true, steps: 2, commDelay: time.Millisecond},
				{device: true, collectives: true, hook: h.hook, compressOnDevice: true, steps: 2, delay: time.Millisecond},
			} {
				got := trainCase(t, c)
				require.Equal(t, len(want), len(got))
				assert.Less(t, maxDiff(want, got), 1e-6, "%+v", c)
			}
		})
	}
}

// GradientAsBucketView on a device: each gradient is a view of its device
// bucket (no copy out), across iterations and the bucket rebuild after the
// first, equal to the CPU's with and without device collectives.
func TestDeviceGradientAsBucketView(t *testing.T) {
	want := trainCase(t, deviceCase{views: true, steps: 3})
	for _, col := range []bool{false, true} {
		got := trainCase(t, deviceCase{device: true, onDevice: true, views: true, collectives: col, steps: 3, delay: time.Millisecond})
		require.Equal(t, len(want), len(got))
		assert.Less(t, maxDiff(want, got), 1e-6, "collectives %v", col)
	}
	errs := runRanks(t, 1, func(rank int, pg comm.ProcessGroup) error {
		dev := sim.New(0)
		defer dev.Close()
		net := mlpNet([]int{3, 4, 2}, 1)
		if err := nn.To(net, dev.Tensors()); err != nil {
			return err
		}
		d, err := Wrap(context.Background(), net, pg, GradientAsBucketView(true))
		if err != nil {
			return err
		}
		defer d.Close()
		x, y := batch(0, 0, 2, 3, 2)
		out, err := d.Forward(autograd.Const(x.Value.MustTo(dev.Tensors())))
		if err != nil {
			return err
		}
		if err := autograd.MSELoss(out, autograd.Const(y.Value.MustTo(dev.Tensors())), autograd.ReductionMean).Backward(); err != nil {
			return err
		}
		for i, p := range net.params {
			gb, goff, ok := sim.BufferOf(p.Grad)
			l := d.r.loc[i]
			bb, _, _ := sim.BufferOf(d.r.dev.tensors[l.bucket])
			if !ok || gb != bb || goff != 4*d.r.buckets[l.bucket].offsets[l.slot] {
				return fmt.Errorf("parameter %d's gradient is not a view of bucket %d", i, l.bucket)
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
}

// FindUnusedParameters all-reduces the used-parameter map after the
// buckets: on a device whose buckets are reduced in host functions on the
// comm queue, the map's all-reduce must be issued in the same order on
// every rank (after the buckets), or the group pairs a bucket with the map.
func TestDeviceFindUnusedMatchesCPU(t *testing.T) {
	want := trainCase(t, deviceCase{findUnused: true, steps: 2})
	for _, c := range []deviceCase{
		{device: true, findUnused: true, steps: 2, delay: 2 * time.Millisecond},
		{device: true, findUnused: true, steps: 2, delay: 2 * time.Millisecond, rank0Only: true},
		{device: true, onDevice: true, findUnused: true, steps: 2, delay: 2 * time.Millisecond},
		{device: true, onDevice: true, collectives: true, findUnused: true, steps: 2, commDelay: 2 * time.Millisecond},
	} {
		got := trainCase(t, c)
		require.Equal(t, len(want), len(got))
		assert.Less(t, maxDiff(want, got), 1e-6, "%+v", c)
	}
}
