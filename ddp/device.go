package ddp

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"goddp/comm"
	"goddp/cuda/devtensor"
	"goddp/ddp/devqueue"
	"goddp/tensor"
)

// The device interfaces are goddp/ddp/devqueue's, re-exported: Device is
// a GPU, or goddp/cuda/sim, that holds the reducer's buckets (OnDevice),
// with memory (Mem), queues (CUDA streams) and markers (CUDA events).
// SimDevice adapts goddp/cuda/sim; goddp/cuda (-tags cuda) implements them
// over CUDA streams and events, and Wrap finds its adapter through the
// model's tensor device (devqueue.Provider). A device that also implements
// DeviceReducer lets the process group all-reduce the buckets in device
// memory (NCCL) instead of staging them through the host.
type (
	Device        = devqueue.Device
	Queue         = devqueue.Queue
	TensorQueue   = devqueue.TensorQueue
	Marker        = devqueue.Marker
	Mem           = devqueue.Mem
	DeviceReducer = devqueue.Reducer
)

// OnDevice keeps the gradient buckets in dev's memory, and reduces them on
// a comm queue of their own: the grad-ready hook enqueues each gradient's
// copy into its bucket (divided by the world size) on the compute queue
// and, when the bucket is full, records a marker there; the comm queue
// waits on that marker, then:
//
//   - when dev is a DeviceReducer and the process group can reduce its
//     memory (nccl on a CUDA device; cuda/sim's Collectives on sim), the
//     group all-reduces the bucket in place on its own queue, after the
//     comm queue's point (so after the bucket's gradients), and the comm
//     queue waits on the group's completion marker: no host staging;
//   - otherwise (tcp, shm, the in-memory group, and every comm hook) the
//     bucket is staged through host memory: a copy to the host, the
//     collective (or the hook) in a host function on the comm queue, and
//     a copy back.
//
// Finalize makes the compute queue wait on each bucket's all-reduce marker
// before copying the results out (or, with GradientAsBucketView, before
// any kernel reads the gradients, which are views of the buckets). The
// host never waits for a bucket during backward.
//
// A model whose parameters live on a device (nn.To) gets OnDevice by
// itself: Wrap uses the device's queue adapter (sim; cuda with -tags cuda)
// or, for a device without one, TensorDevice. Parameters of a host model
// stay host tensors, so finalize ends with one wait for the compute queue
// before Grad is read on the host. Float32 parameters only.
// GradientAsBucketView needs the parameters on the device. The goddp/cuda
// adapter has only run against a fake driver, never on a GPU.
func OnDevice(dev Device) Option { return func(c *config) { c.device = dev } }

// deviceBuckets is the reducer's device state; nil on the CPU.
type deviceBuckets struct {
	dev     Device
	compute Queue
	comm    Queue
	mem     []Mem            // per bucket
	tensors []*tensor.Tensor // per bucket, with GradientAsBucketView: mem as a tensor
	ready   []Marker         // per bucket: its gradients are in (compute queue)
	reduced []Marker         // per bucket: its all-reduce is done (comm queue)
	direct  []bool           // per bucket: reduced in device memory by the group
	wire    []Mem            // per bucket: its 16-bit copy for a compression hook, made on first use
	// noDirect: the group cannot reduce this device's memory (learnt from
	// the first bucket), so every bucket is staged.
	noDirect bool

	// skipWait leaves out the comm queue's wait for a bucket's gradients,
	// skipDone the comm queue's wait for the group's all-reduce: only for
	// the tests that show they are needed.
	skipWait, skipDone bool
}

func validateDevice(c *config, params []param) error {
	if c.device == nil {
		return nil
	}
	tq, _ := c.device.Compute().(TensorQueue)
	for _, p := range params {
		if p.dtype != tensor.Float32 {
			return fmt.Errorf("%w: parameter %q is %v; OnDevice(%v) buckets hold float32 only", ErrInvalidOption, p.name, p.dtype, c.device)
		}
		if v := p.v.Value; !v.IsCPU() && (tq == nil || !tq.Holds(v)) {
			return fmt.Errorf("%w: parameter %q is on %v but the buckets are on %v", ErrInvalidOption, p.name, v.Device(), c.device)
		}
		if c.gradAsBucketView && p.v.Value.IsCPU() {
			return fmt.Errorf("%w: GradientAsBucketView with OnDevice(%v) needs the parameters on the device (parameter %q is on the host): move the model there with nn.To",
				ErrInvalidOption, c.device, p.name)
		}
	}
	if _, ok := c.device.(devqueue.TensorAllocator); c.gradAsBucketView && !ok {
		return fmt.Errorf("%w: GradientAsBucketView: buckets on %v cannot be tensors (its Device has no AllocTensor)", ErrInvalidOption, c.device)
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

// providedDevice returns the queue adapter a tensor device offers through
// its devtensor launcher (goddp/cuda's Context does, under -tags cuda).
func providedDevice(td tensor.Device) (Device, bool, error) {
	dt, ok := devtensor.Of(td)
	if !ok {
		return nil, false, nil
	}
	p, ok := dt.Launcher().(devqueue.Provider)
	if !ok {
		return nil, false, nil
	}
	d, err := p.QueueDevice()
	if err != nil {
		return nil, true, fmt.Errorf("ddp: queues on %v: %w", td, err)
	}
	return d, true, nil
}

func newDeviceBuckets(dev Device) *deviceBuckets {
	return &deviceBuckets{dev: dev, compute: dev.Compute(), comm: dev.NewQueue("ddp comm")}
}

// alloc gives every bucket its device memory (after a build or rebuild);
// asTensors allocates it as device tensors (GradientAsBucketView). The
// previous buckets' memory is freed once no queue uses it.
func (d *deviceBuckets) alloc(bs []*bucket, asTensors bool) error {
	if err := d.compute.Synchronize(); err != nil {
		return fmt.Errorf("ddp: compute queue on %v: %w", d.dev, err)
	}
	if err := d.comm.Synchronize(); err != nil {
		return fmt.Errorf("ddp: comm queue on %v: %w", d.dev, err)
	}
	for _, m := range append(d.mem, d.wire...) {
		if m != nil {
			m.Free()
		}
	}
	d.mem = make([]Mem, len(bs))
	d.tensors = make([]*tensor.Tensor, len(bs))
	d.ready = make([]Marker, len(bs))
	d.reduced = make([]Marker, len(bs))
	d.direct = make([]bool, len(bs))
	d.wire = make([]Mem, len(bs))
	for i, b := range bs {
		var m Mem
		var err error
		if ta, ok := d.dev.(devqueue.TensorAllocator); ok && asTensors {
			m, d.tensors[i], err = ta.AllocTensor(b.numel())
		} else {
			m, err = d.dev.Alloc(b.nbytes())
		}
		if err != nil {
			return fmt.Errorf("ddp: bucket %d (%d bytes) on %v: %w", i, b.nbytes(), d.dev, err)
		}
		d.mem[i] = m
	}
	return nil
}

// view returns slot's region of bucket b as a device tensor shaped like
// the parameter (GradientAsBucketView).
func (d *deviceBuckets) view(b *bucket, slot int, shape []int) *tensor.Tensor {
	return tensor.Narrow(d.tensors[b.index], 0, b.offsets[slot], b.lengths[slot]).Reshape(shape...)
}

func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// fill enqueues g*s into the bucket's slot on the compute queue; a nil g
// contributes zeros; inPlace: g is the slot's view (GradientAsBucketView),
// so only the scaling is left.
func (d *deviceBuckets) fill(b *bucket, slot int, g *tensor.Tensor, s float64, inPlace bool) {
	off, n := b.offsets[slot], b.lengths[slot]
	m := d.mem[b.index]
	switch {
	case g == nil:
		d.compute.Memset0(m, 4*off, 4*n)
		return
	case inPlace:
	case !g.IsCPU():
		// A gradient in device memory: a device-to-device copy, on the
		// compute queue after the kernels that wrote it.
		d.compute.(TensorQueue).CopyFromTensor(m, 4*off, g)
	default:
		d.compute.Upload(m, 4*off, f32Bytes(g.Contiguous().F32()))
	}
	if s != 1 {
		d.compute.Scale(m, off, n, float32(s))
	}
}

// launch enqueues bucket b's all-reduce on the comm queue after its
// gradients and returns a Work that completes with it: in device memory
// when the device and group can (DeviceReducer, no hook), else staged
// through the bucket's host buffer (b.f32), where hook, when set, reduces.
func (d *deviceBuckets) launch(pg comm.ProcessGroup, b *bucket, op comm.ReduceOp, hook CommHook, timeout time.Duration) comm.Work {
	d.ready[b.index] = d.compute.Record()
	if !d.skipWait {
		d.comm.Wait(d.ready[b.index])
	}
	m := d.mem[b.index]
	w := &deviceWork{done: make(chan struct{})}
	var ran atomic.Bool
	var inner comm.Work
	red, ok := d.dev.(DeviceReducer)
	ch, compress := hook.(compressHook)
	caster, canCast := d.comm.(devqueue.Caster)
	if ok && !d.noDirect && (hook == nil || compress && canCast) {
		// The group's queue waits for the comm queue's point (so for the
		// bucket's gradients), the comm queue for the group's completion.
		// A compression hook narrows the bucket on the device first and
		// widens the result back, as it does on the host.
		n, target, dtype := b.numel(), m, comm.Float32
		if compress {
			target, dtype = d.wireOf(b), comm.Float16
			if ch.bf16 {
				dtype = comm.BFloat16
			}
			if target != nil {
				caster.Narrow(target, m, n, ch.bf16)
			}
		}
		var done Marker
		if target != nil {
			inner, done, d.direct[b.index] = red.AllReduceAfter(pg, d.comm, target, n, dtype, op)
		}
		if d.direct[b.index] {
			ran.Store(true)
			if !d.skipDone {
				d.comm.Wait(done)
			}
			if compress {
				caster.Widen(m, target, n, ch.bf16)
			}
		} else if target != nil {
			d.noDirect = true
		}
	}
	if !d.direct[b.index] {
		host := f32Bytes(b.f32)
		d.comm.Download(host, m, 0)
		d.comm.Host(fmt.Sprintf("all-reduce of bucket %d", b.index), func() error {
			ran.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var err error
			if hook != nil {
				err = hook.Reduce(pg, &b.grad).Wait(ctx)
			} else {
				err = pg.AllReduce(b.buffer(), op).Wait(ctx)
			}
			w.err = err
			return err
		})
		d.comm.Upload(m, 0, host)
	}
	reduced := d.comm.Record()
	d.reduced[b.index] = reduced
	skipDone := d.skipDone
	go func() {
		// A marker completes even after its queue failed, so this ends.
		// When the group reduced the bucket, reduced follows its done
		// marker, so inner has completed too and gives its error.
		reduced.Synchronize()
		if inner != nil && !skipDone {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			w.err = inner.Wait(ctx)
			cancel()
		}
		if !ran.Load() {
			w.err = fmt.Errorf("ddp: the comm queue on %v failed before bucket %d's all-reduce: %w", d.dev, b.index, d.comm.Synchronize())
		}
		close(w.done)
	}()
	return w
}

// afterBuckets issues the collective f starts after the buckets' own:
// when a bucket of this iteration is staged, its collective is issued
// from a host function on the comm queue, so f is too (every rank then
// issues the same sequence); when all went to the group in device memory,
// they were issued already and f runs now.
func (d *deviceBuckets) afterBuckets(f func() comm.Work, timeout time.Duration) comm.Work {
	staged := false
	for _, direct := range d.direct {
		staged = staged || !direct
	}
	if !staged {
		return f()
	}
	w := &deviceWork{done: make(chan struct{})}
	var ran atomic.Bool
	d.comm.Host("all-reduce of the used-parameter map", func() error {
		ran.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		w.err = f().Wait(ctx)
		return w.err
	})
	m := d.comm.Record()
	go func() {
		m.Synchronize()
		if !ran.Load() {
			w.err = fmt.Errorf("ddp: the comm queue on %v failed before the used-parameter map's all-reduce: %w", d.dev, d.comm.Synchronize())
		}
		close(w.done)
	}()
	return w
}

// wireOf returns bucket b's 16-bit buffer, allocating it on first use;
// nil when that fails (the bucket is staged then).
func (d *deviceBuckets) wireOf(b *bucket) Mem {
	if d.wire[b.index] == nil {
		m, err := d.dev.Alloc(2 * b.numel())
		if err != nil {
			return nil
		}
		d.wire[b.index] = m
	}
	return d.wire[b.index]
}

// await enqueues on the compute queue a wait for bucket b's all-reduce,
// once per bucket and iteration (waited tracks it).
func (d *deviceBuckets) await(b *bucket, waited []bool) {
	if !waited[b.index] {
		waited[b.index] = true
		d.compute.Wait(d.reduced[b.index])
	}
}

// copyOut enqueues, on the compute queue, a wait for bucket b's all-reduce
// and the copy of slot into g.
func (d *deviceBuckets) copyOut(b *bucket, slot int, g *tensor.Tensor, waited []bool) {
	d.await(b, waited)
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
