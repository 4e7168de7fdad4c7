//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"

	comm "github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/tensor"
)

// queueDriver is what the queues need of a device beyond the Context's
// own calls: streams, events, asynchronous copies on any stream, pinned
// host memory and host functions. dlDevice implements it over the driver
// API; the tests use a fake. Stream and event handles are the driver's
// (CUstream, CUevent).
type queueDriver interface {
	computeStream() unsafe.Pointer
	newStream() (unsafe.Pointer, error)
	destroyStream(s unsafe.Pointer) error
	syncStream(s unsafe.Pointer) error
	newEvent() (unsafe.Pointer, error)
	recordEvent(e, s unsafe.Pointer) error
	syncEvent(e unsafe.Pointer) error
	// queryEvent reports whether e has completed, without waiting
	// (cuEventQuery).
	queryEvent(e unsafe.Pointer) (bool, error)
	destroyEvent(e unsafe.Pointer) error
	waitEvent(s, e unsafe.Pointer) error
	// The copies are asynchronous; their host memory is pinned (hostAlloc).
	htodOn(s unsafe.Pointer, dst uint64, src unsafe.Pointer, n int64) error
	dtohOn(s unsafe.Pointer, dst unsafe.Pointer, src uint64, n int64) error
	dtodOn(s unsafe.Pointer, dst, src uint64, n int64) error
	zeroOn(s unsafe.Pointer, p uint64, n int64) error
	launchOn(s unsafe.Pointer, kernel string, grid, block uint32, args []uint64) error
	// hostFuncOn enqueues runHostFunc(h) (cuLaunchHostFunc).
	hostFuncOn(s unsafe.Pointer, h cgo.Handle) error
	hostAlloc(n int64) (unsafe.Pointer, error)
	hostFree(p unsafe.Pointer) error
}

// runHostFunc runs and releases a host function enqueued by Queue.Host.
func runHostFunc(h cgo.Handle) {
	f := h.Value().(func())
	h.Delete()
	f()
}

// Queues returns the context as a device with real queues for DDP's
// buckets (ddp.OnDevice; ddp.Wrap picks it for a model on c.Tensors()):
// the compute queue is the Context's compute stream, NewQueue creates a
// non-blocking stream, markers are CUDA events without timing, copies to
// and from host memory go through pinned staging buffers with
// cuMemcpy*Async, whose copies between the staging and Go memory run in
// cuLaunchHostFunc callbacks (plain memory copies, which neither block
// nor call CUDA). Its
// AllReduceAfter hands a bucket to an nccl group on the same GPU in
// device memory (nccl.AsDevice), and AllReduceOn (ddp.StreamReducer,
// stream_reduce_cuda.go) puts it on the group's stream before it returns
// (nccl.AsStream), for ddp's stream-ordered finalize. Every call returns
// the same device.
// Run on an H100 by the GPU kit; CI tests the logic over a fake driver.
func (c *Context) Queues() (tensor.QueueDevice, error) {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	if c.queues != nil {
		return c.queues, nil
	}
	qd, ok := c.dev.(queueDriver)
	if !ok {
		return nil, fmt.Errorf("%w: %v has no stream interface", ErrCUDA, c)
	}
	q := &queueDevice{c: c, qd: qd}
	q.compute = &queue{d: q, s: qd.computeStream(), name: "compute"}
	c.queues = q
	return q, nil
}

// Queues makes the tensor device a tensor.QueueProvider (through
// devtensor), so ddp.Wrap finds the queues of a model on c.Tensors().
func (l *launcher) Queues() (tensor.QueueDevice, error) { return l.c.Queues() }

type queueDevice struct {
	c       *Context
	qd      queueDriver
	compute *queue

	mu     sync.Mutex
	queues []*queue // created by NewQueue, destroyed by closeQueues
}

// call runs a driver call under the Context's lock (ErrClosed after Close).
func (d *queueDevice) call(f func() error) error { return d.c.do(f) }

func (d *queueDevice) String() string        { return d.c.String() }
func (d *queueDevice) Compute() tensor.Queue { return d.compute }
func (d *queueDevice) NewQueue(name string) tensor.Queue {
	q := &queue{d: d, name: name}
	err := d.call(func() error {
		var err error
		q.s, err = d.qd.newStream()
		return err
	})
	if err != nil {
		q.err = fmt.Errorf("cuda: creating stream %q on %v: %w", name, d, err)
		return q
	}
	d.mu.Lock()
	d.queues = append(d.queues, q)
	d.mu.Unlock()
	return q
}

// Alloc returns zeroed device memory (waiting for the zeroing: buckets
// are allocated once per bucket layout).
func (d *queueDevice) Alloc(bytes int) (tensor.Mem, error) {
	var p uint64
	err := d.call(func() error {
		var err error
		if p, err = d.c.dev.alloc(int64(max(bytes, 4))); err != nil {
			return err
		}
		if err := d.qd.zeroOn(d.compute.s, p, int64(bytes)); err != nil {
			return err
		}
		return d.qd.syncStream(d.compute.s)
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: allocating %d bytes on %v: %w", bytes, d, err)
	}
	return &mem{d: d, p: p}, nil
}

// AllocTensor implements tensor.TensorAllocator: a bucket that is a
// tensor on c.Tensors(), for GradientAsBucketView.
func (d *queueDevice) AllocTensor(n int) (tensor.Mem, *tensor.Tensor, error) {
	t, err := tensor.ZerosOn(d.c.Tensors(), tensor.Float32, n)
	if err != nil {
		return nil, nil, err
	}
	m, off, ok := devtensor.MemOf(t)
	if !ok || off != 0 {
		return nil, nil, fmt.Errorf("cuda: a new tensor on %v is not a whole allocation", d)
	}
	return &mem{d: d, p: m.Ptr(), view: true}, t, nil
}

// AllReduceAfter implements ddp.DeviceReducer with an nccl group on this
// GPU: NCCL records an event on q's stream now and its stream waits for
// it, so the all-reduce follows q's work on the GPU. The Work completes
// when the nccl backend's watcher has seen NCCL's own event complete, so
// the collective is done on the device then.
func (d *queueDevice) AllReduceAfter(pg comm.ProcessGroup, q tensor.Queue, m tensor.Mem, n int, dtype comm.DType, op comm.ReduceOp) (comm.Work, bool) {
	dc, ok := nccl.AsDevice(pg)
	cq, qok := q.(*queue)
	dm, mok := m.(*mem)
	if !ok || !qok || !mok || cq.d != d || dm.d != d || dc.Device() != d.c.ordinal {
		return nil, false
	}
	w := dc.AllReduceDevice(nccl.DeviceBuffer{DType: dtype, Ptr: uintptr(dm.p), Count: n, Stream: uintptr(cq.s)}, op)
	return w, true
}

// closeQueues destroys the streams NewQueue made (Context.Close, with
// the lock held, after the compute stream's synchronisation).
func (d *queueDevice) closeQueues() error {
	d.mu.Lock()
	qs := d.queues
	d.queues = nil
	d.mu.Unlock()
	var errs []error
	for _, q := range append(qs, d.compute) {
		if q != d.compute {
			errs = append(errs, d.qd.syncStream(q.s))
		}
		q.mu.Lock()
		for _, p := range append(q.retired, q.pin) {
			if p != nil {
				errs = append(errs, d.qd.hostFree(p))
			}
		}
		q.pin, q.pinN, q.retired = nil, 0, nil
		q.mu.Unlock()
		if q != d.compute {
			errs = append(errs, d.qd.destroyStream(q.s))
		}
	}
	return errors.Join(errs...)
}

// mem is device memory; view: it belongs to a tensor (AllocTensor).
type mem struct {
	d    *queueDevice
	p    uint64
	view bool
}

func (m *mem) Free() {
	if m.view {
		return
	}
	if p := atomic.SwapUint64(&m.p, 0); p != 0 {
		_ = m.d.call(func() error { return m.d.c.dev.free(p) })
	}
}

// queue is a CUDA stream. Failures are sticky: the first is kept, host
// functions enqueued after it do nothing, and Synchronize returns it.
type queue struct {
	d    *queueDevice
	s    unsafe.Pointer
	name string

	// emu makes an Upload's or a Download's two enqueues (the copy and its
	// host function) adjacent on the stream, since they share the staging
	// with every other copy: it is held across enqueues only, none of
	// which waits for the stream.
	emu sync.Mutex

	mu      sync.Mutex // guards the fields below; never held across a driver call
	err     error
	pin     unsafe.Pointer // pinned staging for Upload/Download, reused in stream order
	pinN    int
	retired []unsafe.Pointer // outgrown staging, freed at Synchronize
}

func (q *queue) fail(err error) {
	if err == nil {
		return
	}
	q.mu.Lock()
	if q.err == nil {
		q.err = fmt.Errorf("cuda: stream %q on %v: %w", q.name, q.d, err)
	}
	q.mu.Unlock()
}

// Err implements tensor.Queue: the first failure so far.
func (q *queue) Err() error { return q.failed() }

func (q *queue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// enqueue makes one driver call for the queue unless it has failed.
func (q *queue) enqueue(f func() error) {
	if q.failed() != nil {
		return
	}
	q.fail(q.d.call(f))
}

// marker is a CUDA event recorded on a queue; the event is destroyed
// when the marker is collected (a pending event is released by the
// driver when it completes).
type marker struct {
	q *queue
	e unsafe.Pointer
}

func (q *queue) Record() tensor.Event {
	m := &marker{q: q}
	err := q.d.call(func() error {
		e, err := q.d.qd.newEvent()
		if err != nil {
			return err
		}
		m.e = e
		return q.d.qd.recordEvent(e, q.s)
	})
	if err != nil {
		q.fail(fmt.Errorf("recording an event: %w", err))
	}
	if m.e != nil {
		d := q.d
		runtime.AddCleanup(m, func(e unsafe.Pointer) { _ = d.call(func() error { return d.qd.destroyEvent(e) }) }, m.e)
	}
	return m
}

// Synchronize blocks until the event completes; a marker whose record
// failed is complete (its queue holds the error).
func (m *marker) Synchronize() {
	if m.e == nil {
		return
	}
	m.q.fail(m.q.d.call(func() error { return m.q.d.qd.syncEvent(m.e) }))
	runtime.KeepAlive(m)
}

// Query reports, without waiting, whether the event completed
// (cuEventQuery): the caching allocator polls it before it reuses a block
// another stream used (tensor.RecordStream). A failed query counts as
// complete, its error going to the queue.
func (m *marker) Query() bool {
	if m.e == nil {
		return true
	}
	var done bool
	err := m.q.d.call(func() error {
		var err error
		done, err = m.q.d.qd.queryEvent(m.e)
		return err
	})
	runtime.KeepAlive(m)
	if err != nil {
		m.q.fail(err)
		return true
	}
	return done
}

// Wait waits for a CUDA event of this device on the GPU
// (cuStreamWaitEvent). Any other marker fails the queue: waiting for it
// would take a host function that blocks, and CUDA may run every host
// function on one thread (a goroutine waits for it instead).
func (q *queue) Wait(m tensor.Event) {
	cm, ok := m.(*marker)
	if !ok || cm.q.d != q.d {
		q.fail(fmt.Errorf("waiting for a %T: only events of %v can be waited for on its streams", m, q.d))
		return
	}
	if cm.e != nil {
		q.enqueue(func() error { return q.d.qd.waitEvent(q.s, cm.e) })
	}
	runtime.KeepAlive(cm)
}

// staging returns pinned host memory of at least n bytes for the next
// copy (emu held). The stream uses it in order, so one buffer serves every
// copy; an outgrown one is freed at the next Synchronize. cuMemHostAlloc
// runs outside mu.
func (q *queue) staging(n int) (unsafe.Pointer, error) {
	q.mu.Lock()
	if n <= q.pinN {
		defer q.mu.Unlock()
		return q.pin, nil
	}
	q.mu.Unlock()
	var p unsafe.Pointer
	err := q.d.call(func() error {
		var err error
		p, err = q.d.qd.hostAlloc(int64(n))
		return err
	})
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pin != nil {
		q.retired = append(q.retired, q.pin)
	}
	q.pin, q.pinN = p, n
	return p, nil
}

func (q *queue) Upload(dst tensor.Mem, off int, src []byte) {
	if len(src) == 0 || q.failed() != nil {
		return
	}
	q.emu.Lock()
	defer q.emu.Unlock()
	pin, err := q.staging(len(src))
	if err != nil {
		q.fail(err)
		return
	}
	q.Host("stage an upload", func() error {
		copy(unsafe.Slice((*byte)(pin), len(src)), src)
		return nil
	})
	p := dst.(*mem).p + uint64(off)
	q.enqueue(func() error { return q.d.qd.htodOn(q.s, p, pin, int64(len(src))) })
}

func (q *queue) Download(dst []byte, src tensor.Mem, off int) {
	if len(dst) == 0 || q.failed() != nil {
		return
	}
	q.emu.Lock()
	defer q.emu.Unlock()
	pin, err := q.staging(len(dst))
	if err != nil {
		q.fail(err)
		return
	}
	p := src.(*mem).p + uint64(off)
	q.enqueue(func() error { return q.d.qd.dtohOn(q.s, pin, p, int64(len(dst))) })
	q.Host("stage a download", func() error {
		copy(dst, unsafe.Slice((*byte)(pin), len(dst)))
		return nil
	})
}

// Scale runs kernels.cu's scale_f32 in place on the queue's stream.
func (q *queue) Scale(m tensor.Mem, off, n int, s float32) {
	if n == 0 {
		return
	}
	p := m.(*mem).p + 4*uint64(off)
	q.enqueue(func() error {
		return q.d.qd.launchOn(q.s, "scale_f32", grid(n), block, []uint64{p, p, intArg(n), uint64(math.Float32bits(s))})
	})
}

// Narrow implements tensor.Caster with kernels.cu's f32_to_f16 and
// f32_to_bf16 on the queue's stream.
func (q *queue) Narrow(dst, src tensor.Mem, n int, bf16 bool) {
	k := "f32_to_f16"
	if bf16 {
		k = "f32_to_bf16"
	}
	q.cast(k, dst, src, n)
}

// Widen implements tensor.Caster.
func (q *queue) Widen(dst, src tensor.Mem, n int, bf16 bool) {
	k := "f16_to_f32"
	if bf16 {
		k = "bf16_to_f32"
	}
	q.cast(k, dst, src, n)
}

func (q *queue) cast(kernel string, dst, src tensor.Mem, n int) {
	if n == 0 {
		return
	}
	d, s := dst.(*mem).p, src.(*mem).p
	q.enqueue(func() error { return q.d.qd.launchOn(q.s, kernel, grid(n), block, []uint64{d, s, intArg(n)}) })
}

func (q *queue) Memset0(m tensor.Mem, off, n int) {
	if n == 0 {
		return
	}
	p := m.(*mem).p + uint64(off)
	q.enqueue(func() error { return q.d.qd.zeroOn(q.s, p, int64(n)) })
}

// Host enqueues f with cuLaunchHostFunc. It is skipped when the queue
// failed before it ran; its error fails the queue. f must neither block
// nor call CUDA (see tensor.Queue.Host).
func (q *queue) Host(name string, f func() error) {
	if q.failed() != nil {
		return
	}
	h := cgo.NewHandle(func() {
		if q.failed() != nil {
			return
		}
		if err := f(); err != nil {
			q.fail(fmt.Errorf("%s: %w", name, err))
		}
	})
	err := q.d.call(func() error { return q.d.qd.hostFuncOn(q.s, h) })
	if err != nil {
		h.Delete()
		q.fail(fmt.Errorf("%s: %w", name, err))
	}
}

func (q *queue) Synchronize() error {
	err := q.d.call(func() error { return q.d.qd.syncStream(q.s) })
	if err == nil {
		q.mu.Lock()
		old := q.retired
		q.retired = nil
		q.mu.Unlock()
		for _, p := range old {
			q.fail(q.d.call(func() error { return q.d.qd.hostFree(p) }))
		}
	}
	if ferr := q.failed(); ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("cuda: stream %q on %v: %w", q.name, q.d, err)
	}
	return nil
}

// CopyFromTensor implements tensor.TensorQueue: device to device, from
// a tensor on c.Tensors().
func (q *queue) CopyFromTensor(dst tensor.Mem, off int, src *tensor.Tensor) {
	m, soff, ok := devtensor.MemOf(src)
	if !ok {
		q.fail(fmt.Errorf("copying a tensor on %v: not a device tensor", src.Device()))
		return
	}
	d, s, n := dst.(*mem).p+uint64(off), m.Ptr()+uint64(soff), int64(4*src.Numel())
	q.enqueue(func() error { return q.d.qd.dtodOn(q.s, d, s, n) })
	runtime.KeepAlive(src)
}

// CopyToTensor implements tensor.TensorQueue.
func (q *queue) CopyToTensor(dst *tensor.Tensor, src tensor.Mem, off int) {
	m, doff, ok := devtensor.MemOf(dst)
	if !ok {
		q.fail(fmt.Errorf("copying into a tensor on %v: not a device tensor", dst.Device()))
		return
	}
	d, s, n := m.Ptr()+uint64(doff), src.(*mem).p+uint64(off), int64(4*dst.Numel())
	q.enqueue(func() error { return q.d.qd.dtodOn(q.s, d, s, n) })
	runtime.KeepAlive(dst)
}

// Holds implements tensor.TensorQueue: contiguous tensors on c.Tensors().
func (q *queue) Holds(t *tensor.Tensor) bool {
	return t.Device() == q.d.c.Tensors() && t.IsContiguous()
}
