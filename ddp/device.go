package ddp

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"goddp/comm"
	"goddp/tensor"
)

// Device is a GPU, or goddp/cuda/sim, that holds the reducer's buckets
// (OnDevice). It is what the reducer needs of a device and nothing more:
// memory, queues (CUDA streams) and markers (CUDA events). SimDevice
// adapts goddp/cuda/sim; a goddp/cuda adapter implements the same with
// cuMemAlloc, cuMemcpy*Async, the scale_f32 kernel and cuEventRecord /
// cuStreamWaitEvent.
type Device interface {
	String() string
	// Compute is the queue the model's kernels run on.
	Compute() Queue
	// NewQueue returns a queue concurrent with Compute (the comm stream).
	NewQueue(name string) Queue
	// Alloc returns bytes of zeroed device memory.
	Alloc(bytes int) (Mem, error)
}

// Queue is an in-order asynchronous device queue (a CUDA stream): every
// method but Synchronize enqueues and returns.
type Queue interface {
	// Record returns a marker that completes when the queue has run the
	// work enqueued so far (cuEventRecord).
	Record() Marker
	// Wait makes later work on the queue wait for m (cuStreamWaitEvent).
	Wait(m Marker)
	// Upload copies src to dst at byte offset off; src must not change
	// until the queue has run the copy.
	Upload(dst Mem, off int, src []byte)
	// Download copies len(dst) bytes of src from byte offset off.
	Download(dst []byte, src Mem, off int)
	// Scale multiplies n float32s of m from element off by s (a kernel).
	Scale(m Mem, off, n int, s float32)
	// Memset0 zeroes n bytes of m from byte offset off.
	Memset0(m Mem, off, n int)
	// Host runs f on the queue's timeline (cuLaunchHostFunc).
	Host(name string, f func() error)
	// Synchronize blocks the host until the queue is idle and returns
	// its first error.
	Synchronize() error
}

// TensorQueue is a Queue that also moves tensors living on its own device
// (goddp/tensor device tensors) into and out of device memory, device to
// device: what OnDevice needs when the model's parameters, and so its
// gradients, are on the device. Both enqueue and return.
type TensorQueue interface {
	Queue
	// CopyFromTensor copies src's elements to dst at byte offset off.
	CopyFromTensor(dst Mem, off int, src *tensor.Tensor)
	// CopyToTensor copies dst.Numel() float32s of src from byte offset off
	// into dst.
	CopyToTensor(dst *tensor.Tensor, src Mem, off int)
	// Holds reports whether t lives on this queue's device.
	Holds(t *tensor.Tensor) bool
}

// Marker is a point in a queue (a CUDA event).
type Marker interface {
	// Synchronize blocks the host until the marker completes.
	Synchronize()
}

// Mem is device memory.
type Mem interface{ Free() }

// OnDevice keeps the gradient buckets in dev's memory, and reduces them on
// a comm queue of their own: the grad-ready hook enqueues each gradient's
// copy into its bucket (divided by the world size) on the compute queue
// and, when the bucket is full, records a marker there; the bucket's
// all-reduce is enqueued on the comm queue after a wait on that marker,
// staged through host memory for backends without device collectives
// (tcp, shm, the in-memory group); finalize makes the compute queue wait
// on each bucket's all-reduce marker before copying the results out.
// The host never waits for a bucket on the way.
//
// Gradients are host tensors until goddp's tensors know their device, so
// finalize ends with one wait for the compute queue, before Grad is read
// on the host. Float32 parameters only; comm hooks and
// GradientAsBucketView are not available on a device yet.
func OnDevice(dev Device) Option { return func(c *config) { c.device = dev } }

// deviceBuckets is the reducer's device state; nil on the CPU.
type deviceBuckets struct {
	dev     Device
	compute Queue
	comm    Queue
	mem     []Mem    // per bucket
	ready   []Marker // per bucket: its gradients are in (compute queue)
	reduced []Marker // per bucket: its all-reduce is done (comm queue)

	// skipWait leaves out the comm queue's wait for a bucket's gradients:
	// only for the test that shows it is needed.
	skipWait bool
}

func validateDevice(c *config, params []param) error {
	if c.device == nil {
		return nil
	}
	switch {
	case c.hook != nil:
		return fmt.Errorf("%w: comm hooks are not available with OnDevice(%v) yet", ErrInvalidOption, c.device)
	case c.gradAsBucketView:
		return fmt.Errorf("%w: GradientAsBucketView is not available with OnDevice(%v) yet", ErrInvalidOption, c.device)
	}
	tq, _ := c.device.Compute().(TensorQueue)
	for _, p := range params {
		if p.dtype != tensor.Float32 {
			return fmt.Errorf("%w: parameter %q is %v; OnDevice(%v) buckets hold float32 only", ErrInvalidOption, p.name, p.dtype, c.device)
		}
		if v := p.v.Value; !v.IsCPU() && (tq == nil || !tq.Holds(v)) {
			return fmt.Errorf("%w: parameter %q is on %v but the buckets are on %v", ErrInvalidOption, p.name, v.Device(), c.device)
		}
	}
	return nil
}

// paramsDevice returns the device the parameters live on, or an error
// naming two that live on different devices.
func paramsDevice(params []param) (tensor.Device, error) {
	dev := params[0].v.Value.Device()
	for _, p := range params[1:] {
		if d := p.v.Value.Device(); d != dev && !(tensor.IsCPU(d) && tensor.IsCPU(dev)) {
			return nil, fmt.Errorf("%w: parameter %q is on %v but %q is on %v; move the whole model with nn.To",
				ErrInvalidOption, params[0].name, dev, p.name, d)
		}
	}
	return dev, nil
}

func newDeviceBuckets(dev Device) *deviceBuckets {
	return &deviceBuckets{dev: dev, compute: dev.Compute(), comm: dev.NewQueue("ddp comm")}
}

// alloc gives every bucket its device memory (after a build or rebuild).
// The previous buckets' memory is freed once no queue uses it.
func (d *deviceBuckets) alloc(bs []*bucket) error {
	if err := d.compute.Synchronize(); err != nil {
		return fmt.Errorf("ddp: compute queue on %v: %w", d.dev, err)
	}
	if err := d.comm.Synchronize(); err != nil {
		return fmt.Errorf("ddp: comm queue on %v: %w", d.dev, err)
	}
	for _, m := range d.mem {
		m.Free()
	}
	d.mem = make([]Mem, len(bs))
	d.ready = make([]Marker, len(bs))
	d.reduced = make([]Marker, len(bs))
	for i, b := range bs {
		m, err := d.dev.Alloc(b.nbytes())
		if err != nil {
			return fmt.Errorf("ddp: bucket %d (%d bytes) on %v: %w", i, b.nbytes(), d.dev, err)
		}
		d.mem[i] = m
	}
	return nil
}

func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// fill enqueues g*s into the bucket's slot on the compute queue; a nil g
// contributes zeros.
func (d *deviceBuckets) fill(b *bucket, slot int, g *tensor.Tensor, s float64) {
	off, n := b.offsets[slot], b.lengths[slot]
	m := d.mem[b.index]
	if g == nil {
		d.compute.Memset0(m, 4*off, 4*n)
		return
	}
	if !g.IsCPU() {
		// A gradient in device memory: a device-to-device copy, on the
		// compute queue after the kernels that wrote it.
		d.compute.(TensorQueue).CopyFromTensor(m, 4*off, g)
	} else {
		d.compute.Upload(m, 4*off, f32Bytes(g.Contiguous().F32()))
	}
	if s != 1 {
		d.compute.Scale(m, off, n, float32(s))
	}
}

// launch enqueues bucket b's all-reduce on the comm queue after its
// gradients, staged through the bucket's host buffer (b.f32), and returns
// a Work that completes with it.
func (d *deviceBuckets) launch(pg comm.ProcessGroup, b *bucket, op comm.ReduceOp, timeout time.Duration) comm.Work {
	d.ready[b.index] = d.compute.Record()
	if !d.skipWait {
		d.comm.Wait(d.ready[b.index])
	}
	m := d.mem[b.index]
	host := f32Bytes(b.f32)
	w := &deviceWork{done: make(chan struct{})}
	ran := false
	d.comm.Download(host, m, 0)
	d.comm.Host(fmt.Sprintf("all-reduce of bucket %d", b.index), func() error {
		ran = true
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		w.err = pg.AllReduce(b.buffer(), op).Wait(ctx)
		return w.err
	})
	d.comm.Upload(m, 0, host)
	reduced := d.comm.Record()
	d.reduced[b.index] = reduced
	go func() {
		// A marker completes even after its queue failed, so this ends.
		reduced.Synchronize()
		if !ran {
			w.err = fmt.Errorf("ddp: the comm queue on %v failed before bucket %d's all-reduce: %w", d.dev, b.index, d.comm.Synchronize())
		}
		close(w.done)
	}()
	return w
}

// copyOut enqueues, on the compute queue, a wait for bucket b's all-reduce
// (once per bucket and iteration: waited tracks it) and the copy of slot
// into g.
func (d *deviceBuckets) copyOut(b *bucket, slot int, g *tensor.Tensor, waited []bool) {
	if !waited[b.index] {
		waited[b.index] = true
		d.compute.Wait(d.reduced[b.index])
	}
	off, n := b.offsets[slot], b.lengths[slot]
	if !g.IsCPU() {
		d.compute.(TensorQueue).CopyToTensor(g, d.mem[b.index], 4*off)
		return
	}
	d.compute.Download(f32Bytes(g.F32()[:n]), d.mem[b.index], 4*off)
}

// deviceWork completes when the comm queue has finished a bucket.
type deviceWork struct {
	done chan struct{}
	err  error
}

func (w *deviceWork) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", comm.ErrTimeout, ctx.Err())
	}
}

func (w *deviceWork) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
