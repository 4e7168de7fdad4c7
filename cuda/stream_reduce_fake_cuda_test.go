//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// fakeStreamNCCL is fakeNCCL with the nccl group's stream-ordered
// all-reduce (comm/nccl's AllReduceDeviceOn): the wait for the caller's
// ready event, the all-reduce and the record of the caller's end event go
// on the group's stream at the call, each noted in trace as it is issued.
// Abort (ncclCommAbort) fails the all-reduce running and every later one.
// With stuck, an all-reduce never ends until Abort.
type fakeStreamNCCL struct {
	*fakeNCCL
	stuck bool

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	trace   []string
	aborts  int
	reduced []comm.DType // by the stream, as each all-reduce runs
}

func newFakeStreamNCCL(pg comm.ProcessGroup, g *simGPU, device int) *fakeStreamNCCL {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &fakeStreamNCCL{fakeNCCL: &fakeNCCL{ProcessGroup: pg, g: g, s: g.d.NewStream("nccl"), device: device}, ctx: ctx, cancel: cancel}
}

func (f *fakeStreamNCCL) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trace = append(f.trace, fmt.Sprintf(format, args...))
}

func (f *fakeStreamNCCL) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.trace...)
}

// event finds a live event of the simGPU by its handle.
func (g *simGPU) event(h uintptr) *sim.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	for e := range g.events {
		if uintptr(e) == h {
			return (*sim.Event)(e)
		}
	}
	panic(fmt.Sprintf("simGPU: no live event %#x", h))
}

func (f *fakeStreamNCCL) AllReduceDeviceOn(buf nccl.DeviceBuffer, op comm.ReduceOp, ready, end uintptr) comm.Work {
	f.fakeNCCL.calls++
	if ready != 0 {
		f.s.WaitEvent(f.g.event(ready))
		f.note("cuStreamWaitEvent %#x", ready)
	}
	b, off := f.g.at(uint64(buf.Ptr))
	w := &fakeWork{done: make(chan struct{})}
	f.s.Enqueue("ncclAllReduce", func() error {
		var x comm.Buffer
		switch raw := b.Bytes()[off : off+buf.Bytes()]; buf.DType {
		case comm.Float32:
			x = comm.Float32s(b.F32()[off/4 : off/4+buf.Count])
		case comm.Float16:
			x = comm.Float16s(unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), buf.Count))
		default:
			panic(fmt.Sprintf("fakeStreamNCCL: %v", buf.DType))
		}
		f.mu.Lock()
		f.reduced = append(f.reduced, buf.DType)
		f.mu.Unlock()
		if f.stuck {
			<-f.ctx.Done()
		} else {
			w.err = f.ProcessGroup.AllReduce(x, op).Wait(f.ctx)
		}
		if f.ctx.Err() != nil {
			w.err = fmt.Errorf("%w: fake ncclAllReduce aborted: %w", comm.ErrPeerFailed, context.Cause(f.ctx))
		}
		return w.err
	})
	f.note("ncclAllReduce")
	f.g.event(end).Record(f.s)
	f.note("cuEventRecord %#x", end)
	done := f.g.d.NewEvent()
	done.Record(f.s)
	go func() { done.Synchronize(); close(w.done) }()
	return w
}

func (f *fakeStreamNCCL) Abort(cause error) {
	f.mu.Lock()
	f.aborts++
	f.mu.Unlock()
	f.cancel(cause)
}

var (
	_ nccl.StreamCollectives = (*fakeStreamNCCL)(nil)
	_ ddp.StreamReducer      = (*queueDevice)(nil)
	_ ddp.Aborter            = nccl.StreamCollectives(nil)
)

// AllReduceOn puts the all-reduce on the group's stream before it
// returns: the group's stream waits for an event recorded on the comm
// queue (after what the queue held: here an upload on a slowed stream),
// the all-reduce follows, and the event it returns is the one recorded
// right after it (the group's stream is slowed too, so a queue that
// waited for an earlier point would read the unreduced bucket). Two ranks.
func TestStreamReduceOrder(t *testing.T) {
	cudaRanks(t, func(rank int, c *Context, g *simGPU, pg comm.ProcessGroup) error {
		qd, err := c.Queues()
		if err != nil {
			return err
		}
		cq := qd.NewQueue("comm")
		stream(cq.(*queue).s).SetDelay(2 * time.Millisecond)
		fn := newFakeStreamNCCL(pg, g, rank)
		fn.s.SetDelay(2 * time.Millisecond)
		m, err := qd.Alloc(16)
		if err != nil {
			return err
		}
		defer m.Free()
		x := []float32{1, 2, 3, 4}
		for i := range x {
			x[i] *= float32(rank + 1)
		}
		cq.Upload(m, 0, unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 16))
		w, done, ok := qd.(*queueDevice).AllReduceOn(fn, cq, m, 4, comm.Float32, comm.Sum)
		fn.note("returned")
		if !ok {
			return fmt.Errorf("AllReduceOn declined an nccl group on its GPU")
		}
		defer func() { _ = w.Wait(context.Background()) }() // before m is freed
		dm := done.(*marker)
		calls := fn.calls()
		if len(calls) != 4 || !strings.HasPrefix(calls[0], "cuStreamWaitEvent ") || calls[1] != "ncclAllReduce" ||
			calls[2] != fmt.Sprintf("cuEventRecord %#x", uintptr(dm.e)) || calls[3] != "returned" {
			return fmt.Errorf("issued %q, want the wait, the all-reduce and the record of the returned event %#x before the return", calls, uintptr(dm.e))
		}
		if calls[0] == fmt.Sprintf("cuStreamWaitEvent %#x", uintptr(dm.e)) {
			return fmt.Errorf("the group waited for the end event")
		}
		out := make([]float32, 4)
		comp := qd.Compute()
		comp.Wait(done)
		comp.Download(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 16), m, 0)
		if err := comp.Synchronize(); err != nil {
			return err
		}
		if want := []float32{3, 6, 9, 12}; fmt.Sprint(out) != fmt.Sprint(want) {
			return fmt.Errorf("after the returned event the bucket holds %v, want %v", out, want)
		}
		if !done.(tensor.EventQuerier).Query() {
			return fmt.Errorf("the event the compute queue waited for has not completed")
		}
		return w.Wait(context.Background())
	})
}

// A group without the stream-ordered all-reduce (fakeNCCL) is declined,
// so ddp reduces its buckets as before (AllReduceAfter, host-waited).
func TestStreamReduceDeclinesOtherGroups(t *testing.T) {
	c, g := newSimGPU(t, 0)
	qd, err := c.Queues()
	require.NoError(t, err)
	m, err := qd.Alloc(16)
	require.NoError(t, err)
	pg := commtest.NewGroups(1)[0]
	for _, other := range []comm.ProcessGroup{pg, &fakeNCCL{ProcessGroup: pg, g: g, s: g.d.NewStream("nccl")}, newFakeStreamNCCL(pg, g, 1)} {
		_, _, ok := qd.(*queueDevice).AllReduceOn(other, qd.NewQueue("comm"), m, 4, comm.Float32, comm.Sum)
		assert.False(t, ok, "%T on device %d", other, 0)
	}
	m.Free()
	require.NoError(t, c.Close())
}

// DDP over the fake nccl group on the fake driver takes the stream-ordered
// path (Stats().Reduction), issues every bucket's all-reduce through
// AllReduceDeviceOn, never stages a bucket through the host, and gives
// the gradients DDP gives on the CPU, with and without an fp16 hook.
func TestStreamReduceDDPMatchesCPU(t *testing.T) {
	for _, h := range []struct {
		name  string
		hook  ddp.CommHook
		dtype comm.DType
	}{{"plain", nil, comm.Float32}, {"fp16 hook", ddp.FP16CompressHook(), comm.Float16}} {
		t.Run(h.name, func(t *testing.T) {
			train := func(device bool) [][]float32 {
				var res [][]float32
				cudaRanks(t, func(rank int, c *Context, g *simGPU, pg comm.ProcessGroup) error {
					net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 5, 7), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 7, 3))
					var dev tensor.Device = tensor.CPU()
					var fn *fakeStreamNCCL
					if device {
						dev = c.Tensors()
						if err := nn.To(net, dev); err != nil {
							return err
						}
						fn = newFakeStreamNCCL(pg, g, rank)
						fn.s.SetDelay(time.Millisecond)
						pg = fn
					}
					opts := []ddp.Option{ddp.FirstBucketCapMB(100.0 / (1 << 20)), ddp.BucketCapMB(100.0 / (1 << 20))}
					if h.hook != nil {
						opts = append(opts, ddp.WithCommHook(h.hook))
					}
					d, err := ddp.Wrap(context.Background(), net, pg, opts...)
					if err != nil {
						return err
					}
					defer d.Close()
					for step := range 2 {
						rng := tensor.NewRNG(uint64(10*rank + step))
						x := tensor.Randn(rng, tensor.Float32, 4, 5).MustTo(dev)
						y := tensor.Randn(rng, tensor.Float32, 4, 3).MustTo(dev)
						for _, p := range d.Parameters() {
							p.Grad = nil
						}
						out, err := d.Forward(autograd.Const(x))
						if err != nil {
							return err
						}
						if err := autograd.MSELoss(out, autograd.Const(y), autograd.ReductionMean).Backward(); err != nil {
							return err
						}
						if rank == 0 {
							for _, p := range d.Parameters() {
								g, err := p.Grad.To(tensor.CPU())
								if err != nil {
									return err
								}
								res = append(res, append([]float32(nil), g.F32()...))
							}
						}
					}
					if !device {
						return nil
					}
					if got := d.Stats().Reduction; got != "device, stream-ordered" {
						return fmt.Errorf("Stats().Reduction = %q, want the stream-ordered path", got)
					}
					buckets := len(d.Stats().BucketBytes)
					if fn.fakeNCCL.calls != 2*buckets || len(fn.calls()) != 3*2*buckets {
						return fmt.Errorf("%d stream-ordered all-reduces (%d calls), want one per bucket and step (%d buckets)", fn.fakeNCCL.calls, len(fn.calls()), buckets)
					}
					if n := g.count("hostAlloc"); n != 0 {
						return fmt.Errorf("%d pinned staging buffers: a bucket went through the host", n)
					}
					fn.mu.Lock()
					defer fn.mu.Unlock()
					for _, dt := range fn.reduced {
						if dt != h.dtype {
							return fmt.Errorf("NCCL reduced %v, want %v", dt, h.dtype)
						}
					}
					return nil
				})
				return res
			}
			want, got := train(false), train(true)
			require.Len(t, got, len(want))
			for i := range want {
				assert.InDeltaSlice(t, want[i], got[i], 1e-6, "gradient %d", i)
			}
		})
	}
}

// An all-reduce that never ends: ddp's watchdog sees its event pending
// past the timeout (cuEventQuery on the marker AllReduceOn returned),
// aborts the group once (ncclCommAbort), the next Forward fails naming
// the bucket and rank, and the streams waiting for it drain (Close
// returns).
func TestStreamReduceAbortOnTimeout(t *testing.T) {
	c, g := newSimGPU(t, 0)
	net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 5, 3))
	require.NoError(t, nn.To(net, c.Tensors()))
	fn := newFakeStreamNCCL(commtest.NewGroups(1)[0], g, 0)
	fn.stuck = true
	d, err := ddp.Wrap(context.Background(), net, fn, ddp.Timeout(100*time.Millisecond))
	require.NoError(t, err)
	rng := tensor.NewRNG(3)
	x := tensor.Randn(rng, tensor.Float32, 4, 5).MustTo(c.Tensors())
	y := tensor.Randn(rng, tensor.Float32, 4, 3).MustTo(c.Tensors())
	out, err := d.Forward(autograd.Const(x))
	require.NoError(t, err)
	require.NoError(t, autograd.MSELoss(out, autograd.Const(y), autograd.ReductionMean).Backward(), "a stream-ordered backward does not wait for the all-reduce")
	assert.Equal(t, "device, stream-ordered", d.Stats().Reduction)
	var ferr error
	for range 100 { // the watchdog fails the reducer after the 100 ms timeout
		if _, ferr = d.Forward(autograd.Const(x)); ferr != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Error(t, ferr)
	assert.ErrorIs(t, ferr, ddp.ErrTimeout)
	assert.ErrorContains(t, ferr, "bucket 0 all-reduce on rank 0")
	fn.mu.Lock()
	aborts := fn.aborts
	fn.mu.Unlock()
	assert.Equal(t, 1, aborts, "ncclCommAbort")
	d.Close()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed: // the compute stream drained: the aborted all-reduce's event completed
	case <-time.After(5 * time.Second):
		t.Fatal("the Context's Close hangs: a stream still waits for the aborted all-reduce")
	}
}
