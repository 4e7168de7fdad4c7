//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"runtime/cgo"
	"sort"
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

// simGPU is a fake driver that is a GPU in behaviour: its memory, streams,
// events, kernels (kernels.cu compiled for the host) and host functions
// are goddp/cuda/sim's, which run asynchronously and order streams only
// by events; cuBLAS's column-major SGEMM is the CPU engine's row-major one
// on the transposed problem. So the Context, its tensor device and its
// queues run here as they would on a GPU, except for the driver itself.
type simGPU struct {
	d *sim.Device
	// host runs the host functions of every stream, one at a time, on
	// one goroutine, as CUDA may: a host function that waits for another
	// hangs here as it would on a GPU.
	host *hostThread

	mu     sync.Mutex
	bufs   map[uint64]*sim.Buffer
	strms  map[uintptr]*sim.Stream // by handle, for the fake NCCL
	pinned map[unsafe.Pointer][]byte
	events map[unsafe.Pointer]bool // live events
	calls  map[string]int
}

func newSimGPU(t *testing.T, ordinal int) (*Context, *simGPU) {
	g := &simGPU{d: sim.New(ordinal), bufs: map[uint64]*sim.Buffer{}, pinned: map[unsafe.Pointer][]byte{},
		events: map[unsafe.Pointer]bool{}, calls: map[string]int{}, strms: map[uintptr]*sim.Stream{}}
	g.strms[uintptr(unsafe.Pointer(g.d.Compute()))] = g.d.Compute()
	g.host = newHostThread(t)
	t.Cleanup(func() { g.d.Close() })
	return &Context{ordinal: ordinal, dev: g}, g
}

// hostThread is the driver's one thread for host functions.
type hostThread struct{ fs chan func() }

func newHostThread(t *testing.T) *hostThread {
	h := &hostThread{fs: make(chan func())}
	go func() {
		for f := range h.fs {
			f()
		}
	}()
	t.Cleanup(func() { close(h.fs) })
	return h
}

// run runs f on the thread and returns when it has.
func (h *hostThread) run(f func()) {
	done := make(chan struct{})
	h.fs <- func() { f(); close(done) }
	<-done
}

func (g *simGPU) note(call string) {
	g.mu.Lock()
	g.calls[call]++
	g.mu.Unlock()
}

func (g *simGPU) count(call string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[call]
}

// at finds the buffer holding device address p and p's offset in it.
func (g *simGPU) at(p uint64) (*sim.Buffer, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	bases := make([]uint64, 0, len(g.bufs))
	for b := range g.bufs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	i := sort.Search(len(bases), func(i int) bool { return bases[i] > p }) - 1
	if i < 0 {
		panic(fmt.Sprintf("simGPU: address %#x not allocated", p))
	}
	b := g.bufs[bases[i]]
	if int(p-bases[i]) > b.Len() {
		panic(fmt.Sprintf("simGPU: address %#x outside its allocation", p))
	}
	return b, int(p - bases[i])
}

func stream(s unsafe.Pointer) *sim.Stream { return (*sim.Stream)(s) }

// device (the Context's calls), on the compute stream.
func (g *simGPU) alloc(bytes int64) (uint64, error) {
	g.note("alloc")
	b, err := g.d.Alloc(int(bytes))
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.bufs[b.Ptr()] = b
	g.mu.Unlock()
	return b.Ptr(), nil
}

func (g *simGPU) free(p uint64) error {
	g.note("free")
	if err := g.d.Compute().Synchronize(); err != nil {
		return err
	}
	g.mu.Lock()
	b, ok := g.bufs[p]
	delete(g.bufs, p)
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("simGPU: free of %#x, not allocated", p)
	}
	b.Free()
	return nil
}

func (g *simGPU) zero(p uint64, n int64) error { return g.zeroOn(g.computeStream(), p, n) }
func (g *simGPU) htod(dst uint64, src unsafe.Pointer, n int64) error {
	b, off := g.at(dst)
	g.d.Compute().CopyHtoD(b, off, append([]byte(nil), unsafe.Slice((*byte)(src), n)...))
	return g.d.Compute().Synchronize()
}
func (g *simGPU) dtoh(dst unsafe.Pointer, src uint64, n int64) error {
	b, off := g.at(src)
	g.d.Compute().CopyDtoH(unsafe.Slice((*byte)(dst), n), b, off)
	return g.d.Compute().Synchronize()
}
func (g *simGPU) sync() error { return g.d.Compute().Synchronize() }
func (g *simGPU) launch(kernel string, grid, block uint32, args []uint64) error {
	return g.launchOn(g.computeStream(), kernel, grid, block, args)
}

// sgemm: column-major C = op(A)·op(B) is row-major Cᵀ = op(B)ᵀ·op(A)ᵀ.
func (g *simGPU) sgemm(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error {
	g.note("sgemm")
	ab, ao := g.at(a)
	bb, bo := g.at(b)
	cb, co := g.at(c)
	g.d.Compute().Enqueue("sgemm", func() error {
		tensor.Gemm(tb, ta, n, m, k, alpha, bb.F32()[bo/4:], ldb, ab.F32()[ao/4:], lda, beta, cb.F32()[co/4:], ldc)
		return nil
	})
	return nil
}
func (g *simGPU) sgemv(bool, int, int, float32, uint64, int, uint64, float32, uint64) error {
	return fmt.Errorf("simGPU: sgemv not simulated")
}
func (g *simGPU) sasum(int, uint64) (float32, error) {
	return 0, fmt.Errorf("simGPU: sasum not simulated")
}
func (g *simGPU) sscal(int, float32, uint64) error { return fmt.Errorf("simGPU: sscal not simulated") }
func (g *simGPU) setMathMode(bool) error           { return nil }
func (g *simGPU) stream() uintptr                  { return uintptr(g.computeStream()) }
func (g *simGPU) info() Info                       { return Info{Name: "simGPU"} }
func (g *simGPU) close() error                     { return g.d.Synchronize() }

// queueDriver.
func (g *simGPU) computeStream() unsafe.Pointer { return unsafe.Pointer(g.d.Compute()) }
func (g *simGPU) newStream() (unsafe.Pointer, error) {
	g.note("newStream")
	s := g.d.NewStream("queue")
	g.mu.Lock()
	g.strms[uintptr(unsafe.Pointer(s))] = s
	g.mu.Unlock()
	return unsafe.Pointer(s), nil
}
func (g *simGPU) destroyStream(s unsafe.Pointer) error { g.note("destroyStream"); return nil }
func (g *simGPU) syncStream(s unsafe.Pointer) error    { return stream(s).Synchronize() }
func (g *simGPU) newEvent() (unsafe.Pointer, error) {
	e := unsafe.Pointer(g.d.NewEvent())
	g.mu.Lock()
	g.events[e] = true
	g.calls["newEvent"]++
	g.mu.Unlock()
	return e, nil
}
func (g *simGPU) recordEvent(e, s unsafe.Pointer) error {
	(*sim.Event)(e).Record(stream(s))
	return nil
}
func (g *simGPU) syncEvent(e unsafe.Pointer) error { (*sim.Event)(e).Synchronize(); return nil }
func (g *simGPU) queryEvent(e unsafe.Pointer) (bool, error) {
	return (*sim.Event)(e).Query(), nil
}
func (g *simGPU) destroyEvent(e unsafe.Pointer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.events[e] {
		return fmt.Errorf("simGPU: destroying an unknown event")
	}
	delete(g.events, e)
	g.calls["destroyEvent"]++
	return nil
}
func (g *simGPU) waitEvent(s, e unsafe.Pointer) error {
	g.note("waitEvent")
	stream(s).WaitEvent((*sim.Event)(e))
	return nil
}

// The copies read and write their host memory when the stream runs them,
// as DMA from pinned memory does: only pinned memory may be passed.
func (g *simGPU) checkPinned(p unsafe.Pointer, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for q, b := range g.pinned {
		if uintptr(p) >= uintptr(q) && uintptr(p)+uintptr(n) <= uintptr(q)+uintptr(len(b)) {
			return
		}
	}
	panic("simGPU: asynchronous copy from memory that is not pinned")
}

func (g *simGPU) htodOn(s unsafe.Pointer, dst uint64, src unsafe.Pointer, n int64) error {
	g.checkPinned(src, n)
	b, off := g.at(dst)
	stream(s).CopyHtoD(b, off, unsafe.Slice((*byte)(src), n))
	return nil
}
func (g *simGPU) dtohOn(s unsafe.Pointer, dst unsafe.Pointer, src uint64, n int64) error {
	g.checkPinned(dst, n)
	b, off := g.at(src)
	stream(s).CopyDtoH(unsafe.Slice((*byte)(dst), n), b, off)
	return nil
}
func (g *simGPU) dtodOn(s unsafe.Pointer, dst, src uint64, n int64) error {
	g.note("dtod")
	db, doff := g.at(dst)
	sb, soff := g.at(src)
	stream(s).CopyDtoD(db, doff, sb, soff, int(n))
	return nil
}
func (g *simGPU) zeroOn(s unsafe.Pointer, p uint64, n int64) error {
	b, off := g.at(p)
	stream(s).Memset0(b, off, int(n))
	return nil
}
func (g *simGPU) launchOn(s unsafe.Pointer, kernel string, grid, block uint32, args []uint64) error {
	g.note("launch " + kernel)
	return stream(s).Launch(kernel, int(grid), int(block), args...)
}
func (g *simGPU) hostFuncOn(s unsafe.Pointer, h cgo.Handle) error {
	g.note("hostFunc")
	host := g.host
	stream(s).Enqueue("host function", func() error { host.run(func() { runHostFunc(h) }); return nil })
	return nil
}
func (g *simGPU) hostAlloc(n int64) (unsafe.Pointer, error) {
	g.note("hostAlloc")
	b := make([]byte, n)
	p := unsafe.Pointer(&b[0])
	g.mu.Lock()
	g.pinned[p] = b
	g.mu.Unlock()
	return p, nil
}
func (g *simGPU) hostFree(p unsafe.Pointer) error {
	g.note("hostFree")
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.pinned[p]; !ok {
		return fmt.Errorf("simGPU: cuMemFreeHost of memory not pinned")
	}
	delete(g.pinned, p)
	return nil
}

// The queues' copies, kernel, events and host functions in isolation: an
// upload, a scale on another queue after an event, a download back,
// ordered although both streams are slowed.
func TestQueuesCopiesAndEvents(t *testing.T) {
	c, g := newSimGPU(t, 0)
	qd, err := c.Queues()
	require.NoError(t, err)
	again, _ := c.Queues()
	require.Same(t, qd, again)
	m, err := qd.Alloc(4 * 5)
	require.NoError(t, err)
	comp, other := qd.Compute(), qd.NewQueue("comm")
	g.d.Compute().SetDelay(time.Millisecond)
	src := []float32{1, 2, 3, 4, 5}
	comp.Upload(m, 4, unsafe.Slice((*byte)(unsafe.Pointer(&src[1])), 16))
	other.Wait(comp.Record())
	other.Scale(m, 1, 4, 0.5)
	var ran bool
	other.Host("check", func() error { ran = true; return nil })
	comp.Wait(other.Record())
	out := make([]float32, 5)
	comp.Download(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 20), m, 0)
	require.NoError(t, comp.Synchronize())
	assert.Equal(t, []float32{0, 1, 1.5, 2, 2.5}, out)
	assert.True(t, ran)
	assert.Equal(t, 1, g.count("newStream"))
	assert.GreaterOrEqual(t, g.count("waitEvent"), 2)
	assert.Equal(t, 1, g.count("launch scale_f32"))

	// A failing host function fails its queue, and skips later ones.
	other.Host("fail", func() error { return fmt.Errorf("boom") })
	skipped := true
	other.Host("after", func() error { skipped = false; return nil })
	err = other.Synchronize()
	require.ErrorContains(t, err, `stream "comm" on cuda:0: fail: boom`)
	assert.True(t, skipped)

	m.Free()
	require.NoError(t, c.Close())
	assert.Equal(t, 1, g.count("destroyStream"), "Close destroys the streams NewQueue made")
	g.mu.Lock()
	assert.Empty(t, g.pinned, "Close frees the pinned staging")
	g.mu.Unlock()
}

// cudaRanks runs fn on 2 ranks, each with a Context over its own simGPU;
// both ranks' host functions share one thread, as in one process.
func cudaRanks(t *testing.T, fn func(rank int, c *Context, g *simGPU, pg comm.ProcessGroup) error) {
	pgs := commtest.NewGroups(2)
	errs := make([]error, 2)
	host := newHostThread(t)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, g := newSimGPU(t, r)
			g.host = host
			g.d.Compute().SetDelay(200 * time.Microsecond)
			errs[r] = fn(r, c, g, pgs[r])
			if err := c.Close(); errs[r] == nil {
				errs[r] = err
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// ddp.Wrap on a model moved to c.Tensors() finds the Context's queues
// (tensor.Provider) and trains with its buckets on the GPU: gradients
// device to device into the buckets, all-reduce staged through pinned
// memory in host functions on a comm stream, events between the streams.
// Two ranks give the gradients DDP gives on the CPU, with and without
// GradientAsBucketView and an fp16 hook.
func TestQueuesDDPMatchesCPU(t *testing.T) {
	for _, v := range []struct {
		name  string
		views bool
		hook  ddp.CommHook
	}{{"plain", false, nil}, {"bucket views", true, nil}, {"fp16 hook", false, ddp.FP16CompressHook()}} {
		t.Run(v.name, func(t *testing.T) {
			train := func(device bool) [][]float32 {
				var res [][]float32
				run := func(rank int, c *Context, g *simGPU, pg comm.ProcessGroup) error {
					net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 5, 7), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 7, 3))
					var dev tensor.Device = tensor.CPU()
					if device {
						dev = c.Tensors()
						if err := nn.To(net, dev); err != nil {
							return err
						}
					}
					opts := []ddp.Option{ddp.FirstBucketCapMB(100.0 / (1 << 20)), ddp.BucketCapMB(100.0 / (1 << 20)), ddp.GradientAsBucketView(v.views)}
					if v.hook != nil {
						opts = append(opts, ddp.WithCommHook(v.hook))
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
							if p.Grad != nil {
								tensor.Fill(p.Grad, 0)
							}
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
								if device && p.Grad.IsCPU() {
									return fmt.Errorf("a gradient is on the host")
								}
								g, err := p.Grad.To(tensor.CPU())
								if err != nil {
									return err
								}
								res = append(res, append([]float32(nil), g.F32()...))
							}
						}
					}
					if device {
						// The Context's queues carried the buckets: a comm
						// stream, gradients copied device to device, the
						// all-reduce in host functions between events.
						switch {
						case g.count("newStream") != 1:
							return fmt.Errorf("%d streams created, want the comm stream", g.count("newStream"))
						case g.count("hostFunc") == 0 || g.count("waitEvent") == 0 || g.count("hostAlloc") == 0:
							return fmt.Errorf("no host functions, event waits or pinned staging: %v", g.calls)
						case !v.views && g.count("dtod") == 0:
							return fmt.Errorf("no device-to-device copies: %v", g.calls)
						}
					}
					return nil
				}
				cudaRanks(t, run)
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

// A marker that is not the Context's event fails the queue at once: it
// is not waited for in a host function, which would block the one thread
// CUDA may run every host function on.
func TestQueuesWaitForeignMarker(t *testing.T) {
	c, _ := newSimGPU(t, 0)
	qd, err := c.Queues()
	require.NoError(t, err)
	q := qd.NewQueue("comm")
	never := make(chanMarker)
	q.Wait(never)
	ran := false
	q.Host("after", func() error { ran = true; return nil })
	err = q.Synchronize()
	require.ErrorContains(t, err, "only events of cuda:0 can be waited for")
	assert.False(t, ran, "work after a failed wait is skipped")
	require.NoError(t, c.Close())
}

type chanMarker chan struct{}

func (m chanMarker) Synchronize() { <-m }

var _ ddp.DeviceReducer = (*queueDevice)(nil)
var _ tensor.TensorAllocator = (*queueDevice)(nil)
var _ tensor.TensorQueue = (*queue)(nil)

// fakeNCCL is an nccl group on a simGPU as the nccl backend behaves on a
// GPU (comm/nccl's direct path): a device collective records an event on
// the buffer's stream at the call, the group's own stream waits for it,
// reduces the device memory (here through an in-memory group) and the
// Work completes when the group's stream has.
type fakeNCCL struct {
	comm.ProcessGroup
	g      *simGPU
	s      *sim.Stream
	device int
	calls  int
	dtypes []comm.DType
}

func (f *fakeNCCL) Device() int     { return f.device }
func (f *fakeNCCL) Stream() uintptr { return uintptr(unsafe.Pointer(f.s)) }

func (f *fakeNCCL) AllReduceDevice(buf nccl.DeviceBuffer, op comm.ReduceOp) comm.Work {
	f.calls++
	f.g.mu.Lock()
	after, ok := f.g.strms[buf.Stream]
	f.g.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("fakeNCCL: buffer on unknown stream %#x", buf.Stream))
	}
	ev := f.g.d.NewEvent()
	ev.Record(after)
	f.s.WaitEvent(ev)
	b, off := f.g.at(uint64(buf.Ptr))
	w := &fakeWork{done: make(chan struct{})}
	f.s.Enqueue("ncclAllReduce", func() error {
		var x comm.Buffer
		switch raw := b.Bytes()[off : off+buf.Bytes()]; buf.DType {
		case comm.Float32:
			x = comm.Float32s(b.F32()[off/4 : off/4+buf.Count])
		case comm.Float16:
			x = comm.Float16s(unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), buf.Count))
		case comm.BFloat16:
			x = comm.BFloat16s(unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), buf.Count))
		default:
			panic(fmt.Sprintf("fakeNCCL: %v", buf.DType))
		}
		f.dtypes = append(f.dtypes, buf.DType)
		w.err = f.ProcessGroup.AllReduce(x, op).Wait(context.Background())
		return w.err
	})
	done := f.g.d.NewEvent()
	done.Record(f.s)
	go func() { done.Synchronize(); close(w.done) }()
	return w
}

func (f *fakeNCCL) BroadcastDevice(nccl.DeviceBuffer, int) comm.Work { panic("unused") }
func (f *fakeNCCL) AllGatherDevice(_, _ nccl.DeviceBuffer) comm.Work { panic("unused") }
func (f *fakeNCCL) ReduceScatterDevice(_, _ nccl.DeviceBuffer, _ comm.ReduceOp) comm.Work {
	panic("unused")
}

type fakeWork struct {
	done chan struct{}
	err  error
}

func (w *fakeWork) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *fakeWork) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// With an nccl group on the same GPU the buckets go to NCCL in device
// memory (no pinned staging, no host copy of a bucket): each on the comm
// stream's point after the bucket's event, and the comm stream waits for
// the collective before the compute stream copies out. The group's stream
// is slowed, so a missing wait shows. Equal to DDP on the CPU.
func TestQueuesNCCLDirect(t *testing.T) {
	for _, h := range []struct {
		name  string
		hook  ddp.CommHook
		dtype comm.DType
	}{{"plain", nil, comm.Float32}, {"fp16 hook", ddp.FP16CompressHook(), comm.Float16}, {"bf16 hook", ddp.BF16CompressHook(), comm.BFloat16}} {
		t.Run(h.name, func(t *testing.T) { ncclDirect(t, h.hook, h.dtype) })
	}
}

// ncclDirect: with a compression hook the buckets are narrowed on the GPU
// (the cast kernels) and NCCL reduces the 16-bit copies.
func ncclDirect(t *testing.T, hook ddp.CommHook, dtype comm.DType) {
	train := func(device bool) [][]float32 {
		var res [][]float32
		cudaRanks(t, func(rank int, c *Context, g *simGPU, pg comm.ProcessGroup) error {
			net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 5, 7), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 7, 3))
			var dev tensor.Device = tensor.CPU()
			var fn *fakeNCCL
			if device {
				dev = c.Tensors()
				if err := nn.To(net, dev); err != nil {
					return err
				}
				fn = &fakeNCCL{ProcessGroup: pg, g: g, s: g.d.NewStream("nccl"), device: rank}
				fn.s.SetDelay(time.Millisecond)
				pg = fn
			}
			opts := []ddp.Option{ddp.FirstBucketCapMB(100.0 / (1 << 20)), ddp.BucketCapMB(100.0 / (1 << 20))}
			if hook != nil {
				opts = append(opts, ddp.WithCommHook(hook))
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
			if device {
				if fn.calls < 2*2 {
					return fmt.Errorf("%d device all-reduces, want one per bucket and step", fn.calls)
				}
				if n := g.count("hostAlloc"); n != 0 {
					return fmt.Errorf("%d pinned staging buffers: a bucket went through the host", n)
				}
				for _, dt := range fn.dtypes {
					if dt != dtype {
						return fmt.Errorf("NCCL reduced %v, want %v", dt, dtype)
					}
				}
				if hook != nil && g.count("launch f32_to_f16")+g.count("launch f32_to_bf16") == 0 {
					return fmt.Errorf("no cast kernels: %v", g.calls)
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
}

var _ nccl.DeviceCollectives = (*fakeNCCL)(nil)
