package ddp

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// The reducer is built from two strategies chosen once at Wrap, as c10d's
// reducer is from a bucket's device and a comm hook, instead of flags that
// every event handler checks:
//
//   - a bucketHome says where a bucket lives: fresh host memory that
//     gradients are copied into and out of (hostCopies), host memory that
//     Grad views (hostViews: GradientAsBucketView, in ordinary memory or in
//     the region every rank maps), or a tensor on the parameters' device,
//     filled on the compute stream and reduced on a comm stream after an
//     event (deviceHome);
//   - a bucketReduce says what reduces it: AllReduce of the flat bucket
//     (allReduce), AllReduceV of the gradients where they lie (allReduceV),
//     a comm hook (hookReduce), or the device's queues, with the group's
//     device collective when it has one (deviceReduce).
//
// The event handlers (gradReady, launch, watch, finalize) call them and
// branch on nothing else.

// bucketHome is where the buckets live.
type bucketHome interface {
	// build lays out the buckets of an assignment (memory, views).
	build(r *reducer, assign [][]int)
	// fill moves parameter i's gradient, times s, into its slot; a nil
	// Grad contributes zeros.
	fill(r *reducer, i int, s float64)
	// copyBackEarly reports whether a bucket's watcher writes the
	// results into Grad as soon as its reduction completes.
	copyBackEarly(r *reducer) bool
	// writeBack gives parameter i its reduced gradient at finalize;
	// waited tracks the per-bucket waits of this finalize.
	writeBack(r *reducer, i int, waited []bool) error
	// endWriteBack runs once after the write-backs.
	endWriteBack(r *reducer) error
	// describe is Stats.Reduction.
	describe(r *reducer) string
}

// bucketReduce is what reduces a bucket.
type bucketReduce interface {
	// launch starts the reduction of b with op (shadow: a joined rank's
	// zeros) and returns its Work.
	launch(r *reducer, b *bucket, op backend.ReduceOp, shadow bool) backend.Work
	// direct lets the reduction work on g's own memory for slot, and
	// reports whether it does (AllReduceV only).
	direct(r *reducer, b *bucket, slot int, g *tensor.Tensor, s float64) bool
	// after issues f's collective after the buckets' own.
	after(r *reducer, f func() backend.Work) backend.Work
}

// chooseHome picks where the buckets live from the configuration.
func chooseHome(r *reducer) bucketHome {
	switch {
	case r.dev != nil:
		return deviceHome{r.dev}
	case r.cfg.gradAsBucketView:
		return hostViews{}
	}
	return hostCopies{}
}

// chooseReduce picks what reduces the buckets; RegisterCommHook chooses
// again.
func chooseReduce(r *reducer) bucketReduce {
	switch {
	case r.dev != nil:
		return deviceReduce{r.dev}
	case r.cfg.hook != nil:
		return hookReduce{}
	case r.vec != nil:
		return allReduceV{r.vec}
	}
	return allReduce{}
}

// hostCopies: buckets in fresh host memory; gradients are copied in
// (divided on the way) and the results copied back.
type hostCopies struct{}

func (hostCopies) build(r *reducer, assign [][]int) {
	r.buckets, r.loc = newBuckets(assign, r.params, nil)
}

func (hostCopies) fill(r *reducer, i int, s float64) {
	l := r.loc[i]
	b := r.buckets[l.bucket]
	g := r.params[i].v.Grad
	switch {
	case g == nil:
		b.zeroSlot(l.slot)
	case r.locallyUsed[i] && r.red.direct(r, b, l.slot, g, s):
		// Reduced where it lies: no copy in, and none back.
	default:
		b.copyIn(l.slot, g, s)
	}
}

// copyBackEarly: with no unused parameters possible, every Grad exists and
// is final when its bucket is reduced.
func (hostCopies) copyBackEarly(r *reducer) bool { return !r.tolerant() }

func (hostCopies) writeBack(r *reducer, i int, _ []bool) error {
	p := r.params[i]
	l := r.loc[i]
	b := r.buckets[l.bucket]
	if b.direct[l.slot] {
		return nil // reduced in place
	}
	if p.v.Grad == nil {
		g, err := tensor.ZerosOn(p.v.Value.Device(), p.dtype, p.shape...)
		if err != nil {
			return fmt.Errorf("ddp: gradient of %q: %w", p.name, err)
		}
		p.v.Grad = g
	}
	b.copyOut(l.slot, p.v.Grad)
	return nil
}

func (hostCopies) endWriteBack(*reducer) error { return nil }

func (hostCopies) describe(r *reducer) string {
	if _, v := r.red.(allReduceV); v && r.avgInComm() { // what reduceDirect needs: no division on the way
		return "in place"
	}
	return "copies"
}

// hostViews: buckets in host memory that Grad views
// (GradientAsBucketView): autograd accumulates into the bucket, and only
// the division is left. With cfg.shared the memory is the region every
// rank maps (comm.SharedAllocator), reduced where it lies.
type hostViews struct{}

func (hostViews) build(r *reducer, assign [][]int) {
	if r.cfg.shared != nil {
		// The new layout reuses the shared memory: move the gradients
		// that view the old one out of it first.
		r.detachViews()
	}
	r.buckets, r.loc = newBuckets(assign, r.params, r.cfg.shared)
	r.views = make([]*tensor.Tensor, len(r.params))
	for i, p := range r.params {
		l := r.loc[i]
		r.views[i] = r.buckets[l.bucket].view(l.slot, p.shape)
		if p.v.Grad != nil {
			r.buckets[l.bucket].copyIn(l.slot, p.v.Grad, 1)
			p.v.Grad = r.views[i]
		}
	}
}

func (hostViews) fill(r *reducer, i int, s float64) {
	l := r.loc[i]
	b := r.buckets[l.bucket]
	g := r.params[i].v.Grad
	switch {
	case g == nil:
		b.zeroSlot(l.slot)
	case g == r.views[i]:
		b.scaleSlot(l.slot, s)
	default:
		b.copyIn(l.slot, g, s)
		r.params[i].v.Grad = r.views[i]
	}
}

func (hostViews) copyBackEarly(*reducer) bool { return false }

func (hostViews) writeBack(r *reducer, i int, _ []bool) error {
	r.params[i].v.Grad = r.views[i]
	return nil
}

func (hostViews) endWriteBack(*reducer) error { return nil }

func (hostViews) describe(r *reducer) string {
	if r.cfg.shared != nil {
		return "shared buckets"
	}
	return "bucket view"
}

// deviceHome: each bucket is memory on the parameters' device (a tensor
// with GradientAsBucketView), filled on the compute stream; see device.go.
type deviceHome struct{ d *deviceBuckets }

func (h deviceHome) build(r *reducer, assign [][]int) {
	r.buckets, r.loc = newBuckets(assign, r.params, nil)
	r.buildErr = h.d.alloc(r.buckets, r.cfg.gradAsBucketView)
	if !r.cfg.gradAsBucketView || r.buildErr != nil {
		return
	}
	r.views = make([]*tensor.Tensor, len(r.params))
	for i, p := range r.params {
		l := r.loc[i]
		r.views[i] = h.d.view(r.buckets[l.bucket], l.slot, p.shape)
		if p.v.Grad != nil {
			h.d.fill(r.buckets[l.bucket], l.slot, p.v.Grad, 1, false)
			p.v.Grad = r.views[i]
		}
	}
}

func (h deviceHome) fill(r *reducer, i int, s float64) {
	l := r.loc[i]
	g := r.params[i].v.Grad
	h.d.fill(r.buckets[l.bucket], l.slot, g, s, r.views != nil && g == r.views[i])
	if r.views != nil {
		r.params[i].v.Grad = r.views[i]
	}
}

func (deviceHome) copyBackEarly(*reducer) bool { return false }

func (h deviceHome) writeBack(r *reducer, i int, waited []bool) error {
	p := r.params[i]
	l := r.loc[i]
	b := r.buckets[l.bucket]
	if r.views != nil {
		h.d.await(b, waited)
		p.v.Grad = r.views[i]
		return nil
	}
	if p.v.Grad == nil {
		g, err := tensor.ZerosOn(p.v.Value.Device(), p.dtype, p.shape...)
		if err != nil {
			return fmt.Errorf("ddp: gradient of %q: %w", p.name, err)
		}
		p.v.Grad = g
	}
	h.d.copyOut(b, l.slot, p.v.Grad, waited)
	return nil
}

func (h deviceHome) endWriteBack(r *reducer) error {
	if r.params[0].v.Value.IsCPU() {
		// Grad is a host tensor: the host reads it next. (Gradients on
		// the device are read by kernels queued after the copies: the
		// host does not wait.)
		if err := r.syncCompute(); err != nil {
			return fmt.Errorf("ddp: copying the reduced gradients out of the buckets on %v: %w", h.d.dev, err)
		}
	}
	return nil
}

func (h deviceHome) describe(*reducer) string {
	if slices.Contains(h.d.streamed, true) {
		return "device, stream-ordered" // the last synchronised backward's buckets
	}
	return "device"
}

// allReduce all-reduces the flat bucket.
type allReduce struct{}

func (allReduce) launch(r *reducer, b *bucket, op backend.ReduceOp, _ bool) backend.Work {
	return r.pg.AllReduce(b.buffer(), op)
}

func (allReduce) direct(*reducer, *bucket, int, *tensor.Tensor, float64) bool { return false }
func (allReduce) after(_ *reducer, f func() backend.Work) backend.Work        { return f() }

// allReduceV reduces each slot where its gradient lies, the bucket's
// memory standing in for the slots it could not (ReduceInPlace).
type allReduceV struct{ vec backend.VectorAllReducer }

func (v allReduceV) launch(r *reducer, b *bucket, op backend.ReduceOp, shadow bool) backend.Work {
	if shadow {
		return r.pg.AllReduce(b.buffer(), op)
	}
	return v.vec.AllReduceV(b.segs, op)
}

func (allReduceV) direct(r *reducer, b *bucket, slot int, g *tensor.Tensor, s float64) bool {
	return r.reduceDirect(b, slot, g, s)
}

func (allReduceV) after(_ *reducer, f func() backend.Work) backend.Work { return f() }

// hookReduce hands the bucket to the registered comm hook.
type hookReduce struct{}

func (hookReduce) launch(r *reducer, b *bucket, _ backend.ReduceOp, _ bool) backend.Work {
	return r.cfg.hook.Reduce(r.pg, &b.grad)
}

func (hookReduce) direct(*reducer, *bucket, int, *tensor.Tensor, float64) bool { return false }
func (hookReduce) after(_ *reducer, f func() backend.Work) backend.Work        { return f() }

// deviceReduce reduces a bucket on the device's comm queue after its
// gradients' event: with the group's device collective when it has one,
// staged through the host otherwise (device.go); the hook, if any, runs
// there too.
type deviceReduce struct{ d *deviceBuckets }

func (v deviceReduce) launch(r *reducer, b *bucket, op backend.ReduceOp, shadow bool) backend.Work {
	if shadow {
		v.d.compute.Memset0(v.d.mem[b.index], 0, b.nbytes())
	}
	// Stream-ordered only where finalize needs nothing back on the host
	// before Backward returns: not for a joined rank's zeros, not with
	// unused parameters (the used map is read on the host), not when
	// OverlapComm(false) asks backward to wait for each bucket.
	streamOK := !shadow && !r.tolerant() && r.cfg.overlap
	w, done := v.d.launch(r.pg, b, op, r.cfg.hook, r.cfg.timeout, streamOK)
	if done != nil {
		r.watchdog().add(b.index, b.nbytes(), done, w, b.launchAt)
	}
	return w
}

func (deviceReduce) direct(*reducer, *bucket, int, *tensor.Tensor, float64) bool { return false }

func (v deviceReduce) after(r *reducer, f func() backend.Work) backend.Work {
	return v.d.afterBuckets(f, r.cfg.timeout)
}
