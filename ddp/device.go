package ddp

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// The device interfaces are goddp/tensor's stream contract, re-exported:
// Device is a device's queues (a GPU's, or goddp/cuda/sim's) that hold the
// reducer's buckets (OnDevice), with memory (Mem), queues (CUDA streams)
// and markers (CUDA events). goddp/cuda/sim (Device.Queues) and goddp/cuda
// (-tags cuda, Context.Queues) implement them in their own packages, and
// Wrap finds them through the model's tensor device (tensor.QueuesOf), so
// ddp imports no device package. A device that also implements
// DeviceReducer lets the process group all-reduce the buckets in device
// memory (NCCL) instead of staging them through the host.
type (
	Device      = tensor.QueueDevice
	Queue       = tensor.Queue
	TensorQueue = tensor.TensorQueue
	Marker      = tensor.Event
	Mem         = tensor.Mem
)

// DeviceReducer is an optional interface of a Device whose memory a
// process group can all-reduce in place on the device, on a queue of the
// group's own (NCCL's stream), without staging through host memory.
type DeviceReducer interface {
	// AllReduceAfter enqueues an all-reduce of n elements of dtype
	// (Float32, or Float16/BFloat16 for compression hooks) of m (from byte
	// 0, in place) across pg, ordered on the device after the work enqueued
	// on q so far: the group's queue waits for it, the host does not. w
	// completes when the all-reduce has, on the device too, so work a
	// queue is given after w completes sees the result. ok is false, and
	// nothing is enqueued, when pg cannot reduce this device's memory: the
	// caller stages through host memory then.
	AllReduceAfter(pg backend.ProcessGroup, q Queue, m Mem, n int, dtype backend.DType, op backend.ReduceOp) (w backend.Work, ok bool)
}

// StreamReducer is an optional interface of a DeviceReducer whose group
// puts the all-reduce on its own queue before AllReduceOn returns, so that
// an event after it exists at once (torch's ProcessGroupNCCL enqueues on
// the calling thread and records its end event there): done completes
// when the all-reduce has, on the device, and another queue may Wait for
// it right away. With it the buckets are reduced stream-ordered: finalize
// makes the compute queue wait for each bucket's done on the device and
// returns without waiting on the host, and a watchdog polls the events
// (tensor.EventQuerier) with the group's timeout (watchdog.go).
// goddp/cuda/sim's device implements it with its Collectives, and
// goddp/cuda's queues with an nccl group (comm/nccl's AllReduceDeviceOn
// has the all-reduce on NCCL's stream when it returns).
type StreamReducer interface {
	AllReduceOn(pg backend.ProcessGroup, q Queue, m Mem, n int, dtype backend.DType, op backend.ReduceOp) (w backend.Work, done Marker, ok bool)
}

// OnDevice keeps the gradient buckets in dev's memory, and reduces them on
// a comm queue of their own: the grad-ready hook enqueues each gradient's
// copy into its bucket (divided by the world size) on the compute queue
// and, when the bucket is full, records a marker there; the comm queue
// waits on that marker, then:
//
//   - when dev is a DeviceReducer and the process group can reduce its
//     memory (nccl on a CUDA device; cuda/sim's Collectives on sim), the
//     group all-reduces the bucket in place on its own queue, after the
//     comm queue's point (so after the bucket's gradients); a comm
//     goroutine waits for the group's Work, then records the bucket's
//     all-reduce marker on the comm queue: no host staging;
//   - otherwise (tcp, shm, the in-memory group, and every comm hook) the
//     bucket is staged through host memory: a copy to the host on the comm
//     queue, then a comm goroutine waits for it, runs the collective (or
//     the hook) and enqueues the copy back.
//
// No host function waits or calls the device, and the comm goroutines run
// one after another, in launch order, so every rank issues the same
// collectives in the same order. Finalize waits on the host for every
// bucket's Work, then makes the compute queue wait on each bucket's
// all-reduce marker before copying the results out (or, with
// GradientAsBucketView, before any kernel reads the gradients, which are
// views of the buckets). The host never waits for a bucket during
// backward.
//
// When dev is a StreamReducer (cuda/sim with its Collectives; not yet a
// GPU), a bucket is reduced stream-ordered instead, as c10d does: the
// group's all-reduce is on its stream when the call returns, the comm
// queue waits for its end event, and finalize only makes the compute
// queue wait for the bucket's marker, without waiting on the host; a
// watchdog (watchdog.go) bounds each all-reduce by Timeout.
//
// A model whose parameters live on a device (nn.To) gets OnDevice by
// itself: Wrap uses the device's queue adapter (sim; cuda with -tags cuda)
// or, for a device without one, TensorDevice. Parameters of a host model
// stay host tensors, so finalize ends with one wait for the compute queue
// before Grad is read on the host. Float32 parameters only.
// GradientAsBucketView needs the parameters on the device. The goddp/cuda
// adapter ran on a GPU at world 1 (an H100, 2026-11-26, kit 4c9db4b:
// TestGPUQueues, TestGPUDDPOnQueues, examples/mlp under DDP over NCCL; the
// kit passed again on an H200 on 2026-11-27, docs/gpu.md); CI runs it on a
// fake driver built from goddp/cuda/sim. It has never run across two or
// more GPUs.
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
	// streamed: per bucket, its all-reduce was queued stream-ordered
	// (StreamReducer) this iteration: no host goroutine waits for it, the
	// watchdog watches it, and finalize does not wait for it on the host.
	streamed []bool
	wire     []Mem // per bucket: its 16-bit copy for a compression hook, made on first use
	// noDirect: the group cannot reduce this device's memory (learnt from
	// the first bucket), so every bucket is staged.
	noDirect bool
	// tail is closed when the last comm goroutine (after) has ended.
	tail chan struct{}

	// skipWait leaves out the comm queue's wait for a bucket's gradients,
	// skipDone the comm goroutine's wait for the group's all-reduce: only
	// for the tests that show they are needed.
	skipWait, skipDone bool
	// hostWait keeps a StreamReducer's buckets on the host-waited path
	// (a comm goroutine waits for each all-reduce, finalize for every
	// bucket), the path before stream ordering: for the tests that compare
	// the two.
	hostWait bool
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
	if _, ok := c.device.(tensor.TensorAllocator); c.gradAsBucketView && !ok {
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

// deviceFor returns the queues of a goddp/tensor device, for Wrap on a
// model whose parameters live there: the device's own (tensor.QueuesOf),
// or TensorDevice for one without.
func deviceFor(td tensor.Device) (Device, error) {
	d, ok, err := tensor.QueuesOf(td)
	if err != nil {
		return nil, fmt.Errorf("ddp: %w", err)
	}
	if ok {
		return d, nil
	}
	return TensorDevice(td), nil
}

func newDeviceBuckets(dev Device) *deviceBuckets {
	return &deviceBuckets{dev: dev, compute: dev.Compute(), comm: dev.NewQueue("ddp comm")}
}

// alloc gives every bucket its device memory (after a build or rebuild);
// asTensors requires them to be device tensors (GradientAsBucketView);
// they are wherever the device implements tensor.TensorAllocator. The
// previous buckets' memory is freed once no queue uses it.
func (d *deviceBuckets) alloc(bs []*bucket, asTensors bool) error {
	if d.tail != nil {
		<-d.tail // the comm goroutines of a failed iteration use the buckets
	}
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
	d.streamed = make([]bool, len(bs))
	d.wire = make([]Mem, len(bs))
	for i, b := range bs {
		var m Mem
		var err error
		if ta, ok := d.dev.(tensor.TensorAllocator); ok {
			// A bucket is a tensor on the device wherever the device can
			// make one (c10d's bucket is an at::Tensor): its memory comes
			// from the device's caching allocator.
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
//
// The host waits only on comm goroutines (after), never in a host
// function: CUDA may run every host function of a process on one thread
// and forbids CUDA calls in them, so a collective in a host function that
// waits for another queue's host function (or for a peer whose own
// collective waits behind it) hangs. Here the backward goroutine enqueues
// what needs no waiting (the comm queue's wait for the bucket's event, the
// copy to the host, a device collective), and a comm goroutine waits for
// an event or a Work, then issues what follows.
//
// streamOK lets the bucket take the stream-ordered path when the device
// is a StreamReducer: the group's all-reduce is queued after the comm
// queue's point, the comm queue waits for its done event (and widens a
// compressed result after it), and the bucket's reduced marker is
// recorded there at once; no goroutine waits. done is then the event for
// the watchdog; it is nil on the other paths.
func (d *deviceBuckets) launch(pg backend.ProcessGroup, b *bucket, op backend.ReduceOp, hook CommHook, timeout time.Duration, streamOK bool) (_ backend.Work, done Marker) {
	d.streamed[b.index] = false
	d.ready[b.index] = d.compute.Record()
	if !d.skipWait {
		d.comm.Wait(d.ready[b.index])
	}
	m := d.mem[b.index]
	w := &deviceWork{done: make(chan struct{})}
	red, ok := d.dev.(DeviceReducer)
	ch, compress := hook.(compressHook)
	caster, canCast := d.comm.(tensor.Caster)
	var inner backend.Work
	var target Mem
	n := b.numel()
	if ok && !d.noDirect && (hook == nil || compress && canCast) {
		// The group's queue waits for the comm queue's point (so for the
		// bucket's gradients). A compression hook narrows the bucket on
		// the device first and widens the result back, as it does on the
		// host.
		dtype := backend.Float32
		target = m
		if compress {
			target, dtype = d.wireOf(b), backend.Float16
			if ch.bf16 {
				dtype = backend.BFloat16
			}
			if target != nil {
				caster.Narrow(target, m, n, ch.bf16)
			}
		}
		sr, isSR := d.dev.(StreamReducer)
		switch {
		case target == nil:
		case isSR && streamOK && !d.hostWait:
			var ev Marker
			if inner, ev, d.direct[b.index] = sr.AllReduceOn(pg, d.comm, target, n, dtype, op); d.direct[b.index] {
				// The comm queue follows the all-reduce on the device;
				// what it runs next (the widening, the marker the compute
				// queue waits for at finalize) sees the result.
				if !d.skipDone {
					d.comm.Wait(ev)
				}
				if compress {
					caster.Widen(m, target, n, ch.bf16)
				}
				d.reduced[b.index] = d.comm.Record()
				d.streamed[b.index] = true
				return inner, d.reduced[b.index]
			}
			inner, d.direct[b.index] = red.AllReduceAfter(pg, d.comm, target, n, dtype, op) // a group the StreamReducer declines may still reduce device memory
		default:
			inner, d.direct[b.index] = red.AllReduceAfter(pg, d.comm, target, n, dtype, op)
		}
		if !d.direct[b.index] && target != nil {
			d.noDirect = true
		}
	}
	if d.direct[b.index] {
		skipDone := d.skipDone
		d.after(func() {
			ctx, cancel := context.WithTimeout(backend.WaitBeside(context.Background()), timeout)
			defer cancel()
			if skipDone {
				d.reduced[b.index] = d.comm.Record()
				return
			}
			// The collective is done on the device too: what the comm
			// queue runs next (the widening, the marker) follows it.
			w.err = inner.Wait(ctx)
			if compress {
				caster.Widen(m, target, n, ch.bf16)
			}
			d.reduced[b.index] = d.comm.Record()
		}, w)
		return w, nil
	}
	host := f32Bytes(b.f32)
	d.comm.Download(host, m, 0)
	staged := d.comm.Record()
	d.after(func() {
		staged.Synchronize()
		if err := d.comm.Err(); err != nil {
			// Nothing valid reached the host; the collective is skipped,
			// as it was when it ran on the queue.
			w.err = fmt.Errorf("ddp: the comm queue on %v failed before bucket %d's all-reduce: %w", d.dev, b.index, err)
			d.reduced[b.index] = d.comm.Record()
			return
		}
		ctx, cancel := context.WithTimeout(backend.WaitBeside(context.Background()), timeout)
		defer cancel()
		if hook != nil {
			w.err = hook.Reduce(pg, &b.grad).Wait(ctx)
		} else {
			w.err = pg.AllReduce(b.buffer(), op).Wait(ctx)
		}
		d.comm.Upload(m, 0, host)
		d.reduced[b.index] = d.comm.Record()
	}, w)
	return w, nil
}

// after runs f on a comm goroutine once the previous one has ended, then
// completes w: the buckets' collectives, and the used-parameter map's
// after them, are issued in launch order on every rank. Their Waits run
// beside backward, so their contexts say so (comm.WaitBeside), as the
// host reducer's watchers' do.
func (d *deviceBuckets) after(f func(), w *deviceWork) {
	prev, done := d.tail, make(chan struct{})
	d.tail = done
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		f()
		close(w.done)
	}()
}

// afterBuckets issues the collective f starts after the buckets' own, from
// the comm goroutines, so that every rank issues the same sequence.
func (d *deviceBuckets) afterBuckets(f func() backend.Work, timeout time.Duration) backend.Work {
	w := &deviceWork{done: make(chan struct{})}
	d.after(func() {
		ctx, cancel := context.WithTimeout(backend.WaitBeside(context.Background()), timeout)
		defer cancel()
		w.err = f().Wait(ctx)
	}, w)
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
		return fmt.Errorf("%w: %w", backend.ErrTimeout, ctx.Err())
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
