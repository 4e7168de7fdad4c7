//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// slowIdentity is the identity whose backward takes d: compute that a
// bucket's all-reduce can hide behind.
type slowIdentity struct {
	in *autograd.Variable
	d  time.Duration
}

func (o *slowIdentity) Name() string                 { return "testSlow" }
func (o *slowIdentity) Inputs() []*autograd.Variable { return []*autograd.Variable{o.in} }
func (o *slowIdentity) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	time.Sleep(o.d)
	return []*tensor.Tensor{gy.Clone()}
}

// slowLayer is a layer whose backward takes 10 ms.
type slowLayer struct{}

func (slowLayer) NamedParameters() []nn.NamedParameter { return nil }
func (slowLayer) NamedBuffers() []nn.NamedBuffer       { return nil }
func (slowLayer) Train(bool)                           {}
func (slowLayer) Training() bool                       { return true }
func (slowLayer) Forward(h *autograd.Variable) *autograd.Variable {
	return autograd.FromOp(h.Value.Clone(), &slowIdentity{h, 10 * time.Millisecond})
}

// The overlap bar on the fake cuda driver (the Context's streams, events
// and one host-function thread, over goddp/cuda/sim): with the buckets on
// the device (OnDevice(c.Queues())), each reduced on the comm stream after
// its event while backward goes on, at least 80% of the all-reduce time is
// hidden behind backward, as on sim (ddp's TestDeviceOverlapHidesCommunication).
//
// The figure is a timing: a loaded machine (a parallel test binary, the
// race detector) can stall one iteration's backward or comm goroutine for
// tens of milliseconds. So the bar must be met on one of three tries, not
// on every one; a run without overlap (OverlapComm(false): under 1%) fails
// all three.
func TestQueuesOverlapHidesCommunication(t *testing.T) {
	var errs []error
	for try := range 3 {
		errs = overlapOnFakeCuda(t)
		ok := true
		for _, err := range errs {
			ok = ok && err == nil
		}
		if ok {
			return
		}
		t.Logf("try %d: %v", try, errs)
	}
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func overlapOnFakeCuda(t *testing.T) []error {
	const layers = 16
	pgs := commtest.NewGroups(2, commtest.WithLatency(2*time.Millisecond))
	host := newHostThread(t)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, g := newSimGPU(t, rank)
			g.host = host
			errs[rank] = func(pg comm.ProcessGroup) error {
				var ls []nn.Layer
				for i := range layers {
					if i > 0 {
						ls = append(ls, slowLayer{})
					}
					ls = append(ls, nn.NewLinear(tensor.NewRNG(uint64(i)), 8, 8))
				}
				net := nn.NewSequential(ls...)
				q, err := c.Queues()
				if err != nil {
					return err
				}
				const capMB = 288.0 / (1 << 20)
				d, err := ddp.Wrap(context.Background(), net, pg, ddp.FirstBucketCapMB(capMB), ddp.BucketCapMB(capMB), ddp.OnDevice(q))
				if err != nil {
					return err
				}
				defer d.Close()
				if got := len(d.Stats().BucketBytes); got != layers {
					return fmt.Errorf("%d buckets, want one per layer (%d)", got, layers)
				}
				for step := range 2 {
					rng := tensor.NewRNG(uint64(10*rank + step))
					x, y := tensor.Randn(rng, tensor.Float32, 4, 8), tensor.Randn(rng, tensor.Float32, 4, 8)
					out, err := d.Forward(autograd.Const(x))
					if err != nil {
						return err
					}
					if err := autograd.MSELoss(out, autograd.Const(y), autograd.ReductionMean).Backward(); err != nil {
						return err
					}
				}
				s := d.Stats()
				h := s.Total.HiddenFraction()
				t.Logf("rank %d on the fake cuda:%d: %.1f%% of communication hidden", rank, rank, 100*h)
				if h < 0.8 {
					return fmt.Errorf("hidden %.2f, want >= 0.8 (comm %v, wait %v over %d iterations)", h, s.Total.Comm, s.Total.CommWait, s.Iterations)
				}
				return nil
			}(pgs[rank])
			if err := c.Close(); errs[rank] == nil {
				errs[rank] = err
			}
		}()
	}
	wg.Wait()
	return errs
}
