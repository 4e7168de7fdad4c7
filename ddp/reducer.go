package ddp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// reducer is the gradient synchronisation state machine (torch's
// Reducer). It is driven by three events:
//
//	prepare(out)      end of a synchronised Forward: arm the hooks
//	gradReady(i)      autograd hook: parameter i's gradient is final
//	finalize()        queued on the backward pass at the first hook
//
// and does no I/O except through the injected ProcessGroup. See doc.go.
type reducer struct {
	mu  sync.Mutex
	pg  backend.ProcessGroup
	cfg *config

	params  []param
	buckets []*bucket
	loc     []paramLoc
	views   []*tensor.Tensor // gradient_as_bucket_view: Grad views per parameter

	// Per-iteration state.
	expectHooks bool
	pass        *autograd.Pass
	ready       []bool
	nextBucket  int
	div         float64 // gradients are multiplied by 1/div while copied in
	hookErr     error
	inlineWait  time.Duration // OverlapComm(false): time backward spent waiting in launch
	markAtFirst []int         // parameters to mark ready (unused) at the first hook
	firstHook   time.Time
	prepared    time.Time // end of Forward
	shadowing   bool

	// find_unused_parameters accounting.
	locallyUsed []bool    // a hook fired since the last synchronised backward
	usedMap     []float32 // all-reduced: number of ranks that used each parameter
	usedWork    backend.Work
	usedLaunch  bool

	// Bucket rebuild from the observed order (torch's rebuild_buckets).
	recordOrder    bool
	order          []int
	rebuildPending bool
	rebuilt        bool

	// static_graph: parameters unused in the first iteration.
	staticKnown  bool
	staticUnused []bool
	staticGlobal []bool // unused on every rank in the first iteration

	dev      *deviceBuckets // OnDevice; nil on the CPU
	wd       *watchdog      // watches stream-ordered all-reduces; made at the first one
	buildErr error          // allocating device buckets failed

	// The two strategies the reducer is built from (strategy.go): where
	// the buckets live, and what reduces them.
	home bucketHome
	red  bucketReduce

	// vec reduces gradients in place (ReduceInPlace): nil unless the
	// group implements comm.VectorAllReducer and the configuration allows
	// it. claimed holds the memory of this iteration's direct slots, so
	// that two gradients sharing memory are never reduced twice.
	vec     backend.VectorAllReducer
	claimed []span

	iterations int64
	stats      *statsRecorder
	timeline   *Timeline
	remove     []func()
}

func newReducer(pg backend.ProcessGroup, cfg *config, params []param, st *statsRecorder, tl *Timeline) *reducer {
	r := &reducer{pg: pg, cfg: cfg, params: params, div: float64(pg.Size()), stats: st, timeline: tl}
	r.ready = make([]bool, len(params))
	r.locallyUsed = make([]bool, len(params))
	r.usedMap = make([]float32, len(params))
	r.staticUnused = make([]bool, len(params))
	r.staticGlobal = make([]bool, len(params))
	if cfg.device != nil {
		r.dev = newDeviceBuckets(cfg.device)
	}
	if v, ok := backend.AsVectorAllReducer(pg); ok && cfg.inPlace && cfg.device == nil && !cfg.gradAsBucketView {
		r.vec = v
	}
	r.home, r.red = chooseHome(r), chooseReduce(r)
	r.build(assignBuckets(reverseOrder(len(params)), params, mbToBytes(cfg.firstBucketCapMB), mbToBytes(cfg.bucketCapMB)))
	for i := range params {
		r.remove = append(r.remove, params[i].v.RegisterGradReadyHook(func(_ *autograd.Variable, pass *autograd.Pass) {
			r.gradReady(i, pass)
		}))
	}
	return r
}

// build installs a bucket assignment (where: the bucket home). With
// gradient_as_bucket_view, existing gradients move into the new bucket
// memory and Grad becomes the view.
func (r *reducer) build(assign [][]int) {
	r.home.build(r, assign)
	for _, b := range r.buckets {
		b.grad.owner = b
	}
}

func (r *reducer) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.remove {
		f()
	}
	r.remove = nil
	r.expectHooks = false
	if r.wd != nil {
		r.wd.close()
	}
}

// watchdog returns the reducer's watchdog, made on first use (the first
// stream-ordered bucket); the caller holds mu.
func (r *reducer) watchdog() *watchdog {
	if r.wd == nil {
		r.wd = newWatchdog(r.pg, r.cfg.timeout, r.timeline)
	}
	return r.wd
}

// failure is the watchdog's verdict on an earlier iteration's
// stream-ordered all-reduces, or nil.
func (r *reducer) failure() error {
	if r.wd == nil {
		return nil
	}
	return r.wd.failure()
}

// syncCompute waits for the device's compute queue; with stream-ordered
// buckets pending, it returns the watchdog's error instead if the
// watchdog fails the reducer first.
func (r *reducer) syncCompute() error {
	if r.wd == nil {
		return r.dev.compute.Synchronize()
	}
	return r.wd.syncQueue(r.dev.compute)
}

// reduction names the path the buckets take (Stats.Reduction); the caller
// holds mu.
func (r *reducer) reduction() string { return r.home.describe(r) }

// setHook installs a comm hook registered after Wrap: what reduces the
// buckets is chosen again. The caller holds mu.
func (r *reducer) setHook(h CommHook) {
	r.cfg.hook = h
	r.red = chooseReduce(r)
}

// releaseShared gives the shared bucket memory back to the group (Close):
// gradients that view it get memory of their own first, since the next
// Wrap on the group may reuse it.
func (r *reducer) releaseShared() error {
	if r.cfg.shared == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.detachViews()
	r.views = nil
	var first error
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		if m := r.cfg.shared[dt]; m != nil {
			if err := r.cfg.sharedAlloc.FreeShared(m); err != nil && first == nil {
				first = fmt.Errorf("ddp: giving back the shared %v buckets: %w", dt, err)
			}
		}
	}
	r.cfg.shared = nil
	return first
}

// detachViews gives every gradient that views a bucket memory of its own.
func (r *reducer) detachViews() {
	for i, p := range r.params {
		if r.views != nil && p.v.Grad != nil && p.v.Grad == r.views[i] {
			p.v.Grad = p.v.Grad.Clone()
		}
	}
}

// usesUsedMap reports whether this iteration all-reduces the used-parameter
// map: always with dynamic find_unused_parameters, and in the first
// iteration of a static graph.
func (r *reducer) usesUsedMap() bool {
	if r.cfg.staticGraph {
		return !r.staticKnown
	}
	return r.cfg.findUnused
}

// tolerant reports whether parameters without gradient are allowed this iteration.
func (r *reducer) tolerant() bool { return r.cfg.findUnused || r.cfg.staticGraph }

// copyBackEarly: the watcher goroutine writes results into Grad as soon as
// a bucket's reduction completes (the home decides).
func (r *reducer) copyBackEarly() bool { return r.home.copyBackEarly(r) }

// avgInComm reports whether the division by the world size is left to the
// collective (comm.Avg) instead of being done while filling the bucket.
// With gradient_as_bucket_view there is no copy to fuse the division into.
// Without it, when the world size is a power of two, the bucket is filled
// by a plain copy (a memmove, about twice as fast as the scalar
// multiply-copy on one core) and the backend divides only the slice each
// rank reduces (shm) or the result: multiplying by 2^-k is exact, so
// (a+b+...)/n equals torch's a/n+b/n+... bit for bit, except in the
// subnormal range or when the sum itself overflows. Other world sizes keep
// torch's division during the copy, with its rounding. The choice depends
// only on the configuration, the world size and the divisor, which agree
// across ranks, so every rank picks the same op.
func (r *reducer) avgInComm() bool {
	n := r.pg.Size()
	return r.cfg.hook == nil && r.div == float64(n) && (r.views != nil || n&(n-1) == 0)
}

// resetIteration clears the per-iteration accounting. A previous iteration
// that never reached finalize (its backward panicked) may still have
// collectives in flight: they are drained first.
func (r *reducer) resetIteration() {
	for _, b := range r.buckets {
		if b.launched && b.done != nil {
			<-b.done
		}
	}
	clear(r.ready)
	r.claimed = r.claimed[:0]
	for _, b := range r.buckets {
		b.resetSegs()
		b.pending = len(b.params)
		b.launched = false
		b.shadow = false
		b.err = nil
		b.done = nil
	}
	r.nextBucket = 0
	r.pass = nil
	r.hookErr = nil
	r.inlineWait = 0
	r.markAtFirst = r.markAtFirst[:0]
	r.usedWork = nil
	r.usedLaunch = false
}

// prepare arms the hooks after a synchronised Forward (torch's
// prepare_for_backward). out is the forward output, walked to find unused
// parameters when FindUnusedParameters is set; div is the gradient divisor.
func (r *reducer) prepare(out *autograd.Variable, div float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetIteration()
	r.expectHooks = true
	r.div = div
	r.prepared = time.Now()
	r.firstHook = time.Time{}
	r.recordOrder = r.cfg.rebuild && !r.rebuilt && !r.rebuildPending && (r.cfg.staticGraph || !r.cfg.findUnused)
	r.order = r.order[:0]
	switch {
	case r.cfg.staticGraph && r.staticKnown:
		for i, u := range r.staticUnused {
			if u {
				r.markAtFirst = append(r.markAtFirst, i)
			}
		}
	case r.cfg.findUnused && !r.cfg.staticGraph && out != nil:
		reach := reachableLeaves(out)
		for i, p := range r.params {
			if !reach[p.v] {
				r.markAtFirst = append(r.markAtFirst, i)
			}
		}
	}
}

// gradReady is the autograd hook (torch's autograd_hook + mark_variable_ready).
func (r *reducer) gradReady(i int, pass *autograd.Pass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.locallyUsed[i] = true
	if !r.expectHooks {
		return // NoSync, or a backward not preceded by a synchronised Forward
	}
	if r.pass != pass {
		r.pass = pass
		r.firstHook = time.Now()
		pass.QueueCallback(r.finalize)
		for _, u := range r.markAtFirst {
			r.markReady(u)
		}
	}
	if r.ready[i] {
		l := r.loc[i]
		b := r.buckets[l.bucket]
		if !b.launched {
			// Marked unused by the graph walk, yet reached: its bucket has
			// not left yet, so take the real gradient.
			r.fillSlot(i)
			return
		}
		if r.hookErr == nil {
			r.hookErr = fmt.Errorf("%w: parameter %q received its gradient after bucket %d was already being reduced; "+
				"it was marked unused because it is not reachable from Forward's output (FindUnusedParameters walks that graph) "+
				"or because StaticGraph saw it unused in the first iteration. Compute the loss only from Forward's output, "+
				"or do not set StaticGraph when the set of used parameters changes",
				ErrReduction, r.params[i].name, l.bucket)
		}
		return
	}
	r.markReady(i)
}

// markReady moves parameter i's gradient into its bucket and launches every
// bucket that is ready, strictly in index order.
func (r *reducer) markReady(i int) {
	r.ready[i] = true
	if r.recordOrder {
		r.order = append(r.order, i)
	}
	r.fillSlot(i)
	b := r.buckets[r.loc[i].bucket]
	b.pending--
	if b.pending == 0 {
		r.launchReady()
	}
}

// fillSlot writes Grad/div into the bucket; a missing Grad contributes zeros.
func (r *reducer) fillSlot(i int) {
	s := 1 / r.div
	if r.avgInComm() {
		s = 1
	}
	r.home.fill(r, i, s)
}

// launchReady launches ready buckets in index order (next_bucket): a bucket
// that is ready early waits for its predecessors, so every rank issues the
// same sequence of collectives whatever order its gradients arrive in.
func (r *reducer) launchReady() {
	for r.nextBucket < len(r.buckets) && r.buckets[r.nextBucket].pending == 0 {
		r.launch(r.buckets[r.nextBucket], false)
		r.nextBucket++
	}
	if r.nextBucket == len(r.buckets) && r.usesUsedMap() && !r.usedLaunch {
		for i, u := range r.locallyUsed {
			r.usedMap[i] = 0
			if u && !r.shadowing {
				r.usedMap[i] = 1
			}
		}
		r.usedLaunch = true
		r.usedWork = r.red.after(r, func() backend.Work { return r.pg.AllReduce(backend.Float32s(r.usedMap), backend.Sum) })
	}
}

// span is a gradient's memory, [lo, hi).
type span struct{ lo, hi uintptr }

// reduceDirect makes slot's all-reduce work on g's own memory when it can:
// a contiguous CPU gradient of the bucket's dtype and size that shares no
// memory with another gradient of this iteration, and no division to apply
// on the way (s == 1: the collective averages, at power-of-two world sizes;
// at others torch's rounding needs the division of each gradient before the
// sum, and doing it to Grad in place would corrupt a gradient that later
// accumulates into the same memory). It reports whether it did.
func (r *reducer) reduceDirect(b *bucket, slot int, g *tensor.Tensor, s float64) bool {
	if s != 1 || !g.IsCPU() || !g.IsContiguous() || g.DType() != b.dtype || g.Numel() != b.lengths[slot] || g.Numel() == 0 {
		return false
	}
	var buf backend.Buffer
	if b.dtype == tensor.Float64 {
		buf = backend.Float64s(g.F64())
	} else {
		buf = backend.Float32s(g.F32())
	}
	lo := uintptr(unsafe.Pointer(&buf.Bytes[0]))
	sp := span{lo, lo + uintptr(len(buf.Bytes))}
	for _, c := range r.claimed {
		if sp.lo < c.hi && c.lo < sp.hi {
			return false
		}
	}
	r.claimed = append(r.claimed, sp)
	b.segs[slot] = buf
	b.direct[slot] = true
	return true
}

func (r *reducer) launch(b *bucket, shadow bool) {
	b.launched = true
	b.shadow = shadow
	b.launchAt = time.Now()
	b.done = make(chan struct{})
	op := backend.Sum
	if r.avgInComm() {
		op = backend.Avg
	}
	w := r.red.launch(r, b, op, shadow)
	if r.dev != nil && r.dev.streamed[b.index] {
		// Stream-ordered: the compute queue waits for it on the device
		// (finalize), the watchdog watches it; no goroutine waits.
		b.done = nil
		return
	}
	early := r.copyBackEarly() && !shadow
	if !r.cfg.overlap && !shadow {
		// OverlapComm(false): finish the bucket here, on the backward
		// goroutine, before backward continues. Backward waited from the
		// launch on: a backend may run a small collective inside launch
		// (shm does), so the wait after it alone undercounts.
		r.watch(b, w, early)
		r.inlineWait += time.Since(b.launchAt)
		return
	}
	go r.watch(b, w, early)
}

// watch waits for one bucket's Work off the backward goroutine, so the
// completion time is known precisely (for the overlap statistics) and, when
// possible, the result is copied back into Grad while backward continues.
func (r *reducer) watch(b *bucket, w backend.Work, copyBack bool) {
	// The watcher waits beside backward: marked so, a backend does not
	// spin long on its behalf. With 2 ranks on 2 cores, shm's 2 ms spin
	// while a peer had not reached the bucket took the core from backward
	// (docs/changelog.md, 2026-11-27: f2b90bb).
	ctx, cancel := context.WithTimeout(backend.WaitBeside(context.Background()), r.cfg.timeout)
	err := w.Wait(ctx)
	timedOut := ctx.Err() != nil
	cancel()
	if err != nil {
		err = fmt.Errorf("ddp: all-reduce of bucket %d (%d bytes, %d parameters) failed: %w", b.index, b.nbytes(), len(b.params), err)
		if timedOut {
			err = fmt.Errorf("%w after %v: %w", ErrTimeout, r.cfg.timeout, err)
		}
	}
	b.doneAt = time.Now()
	if err == nil && copyBack {
		for slot, i := range b.params {
			if g := r.params[i].v.Grad; g != nil && !b.direct[slot] {
				b.copyOut(slot, g)
			}
		}
	}
	b.err = err
	if r.timeline != nil && !b.shadow {
		r.timeline.record(fmt.Sprintf("allreduce bucket %d", b.index), "comm", tidComm, b.launchAt, b.doneAt.Sub(b.launchAt),
			map[string]any{"bytes": b.nbytes(), "params": len(b.params)})
	}
	close(b.done)
}

// waitLaunched blocks until every launched bucket's watcher finished and
// returns the first error. The watchers are bounded by the timeout; the timer
// here is only a backstop against a Work that ignores its context.
func (r *reducer) waitLaunched() error {
	var first error
	backstop := time.NewTimer(r.cfg.timeout + 5*time.Second)
	defer backstop.Stop()
	for _, b := range r.buckets {
		if !b.launched || b.done == nil { // nil: stream-ordered, not waited on the host
			continue
		}
		select {
		case <-b.done:
			if b.err != nil && first == nil {
				first = b.err
			}
		case <-backstop.C:
			if first == nil {
				first = fmt.Errorf("%w: bucket %d's all-reduce did not finish within %v", ErrTimeout, b.index, r.cfg.timeout)
			}
			return first
		}
	}
	if r.usedWork != nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.timeout)
		err := r.usedWork.Wait(ctx)
		cancel()
		if err != nil && first == nil {
			first = fmt.Errorf("ddp: all-reduce of the used-parameter map failed: %w", err)
		}
	}
	return first
}

// finalize ends a synchronised backward (torch's finalize_backward): it
// marks parameters that got no gradient, waits for every bucket and writes
// the averaged gradients back.
func (r *reducer) finalize() (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bwdEnd := time.Now()
	defer func() {
		r.expectHooks = false
		r.pass = nil
		clear(r.locallyUsed)
		if err != nil && r.dev != nil {
			// No write-back waited for the stream-ordered buckets: the
			// compute queue must not refill one the group still reads.
			for _, b := range r.buckets {
				if b.launched && b.done == nil {
					r.dev.compute.Wait(r.dev.reduced[b.index])
				}
			}
		}
	}()

	var missing []int
	for i, ok := range r.ready {
		if !ok {
			missing = append(missing, i)
		}
	}
	firstStatic := r.cfg.staticGraph && !r.staticKnown
	if len(missing) > 0 && !r.tolerant() {
		// Still launch every bucket (the missing gradients count as zero)
		// so that ranks which did get these gradients complete their
		// iteration instead of hanging until the timeout; then report.
		for _, i := range missing {
			r.markReady(i)
		}
		_ = r.waitLaunched() // leave no collective touching our memory
		return r.unusedError(missing)
	}
	for _, i := range missing {
		r.markReady(i)
		if firstStatic {
			r.staticUnused[i] = true
		}
	}
	waitStart := time.Now()
	err = r.waitLaunched()
	waitEnd := time.Now()
	if err == nil {
		err = r.hookErr
	}
	if err == nil {
		err = r.failure()
	}
	if err != nil {
		return err
	}

	// Write back what the watchers did not.
	if !r.copyBackEarly() {
		var globalUnused []bool
		if r.usedWork != nil {
			globalUnused = make([]bool, len(r.params))
			for i, n := range r.usedMap {
				globalUnused[i] = n == 0
			}
			if firstStatic {
				copy(r.staticGlobal, globalUnused)
			}
		} else if r.cfg.staticGraph {
			globalUnused = r.staticGlobal
		}
		waited := make([]bool, len(r.buckets))
		for i := range r.params {
			if globalUnused != nil && globalUnused[i] {
				continue // unused on every rank: leave Grad untouched, as torch does
			}
			if err := r.home.writeBack(r, i, waited); err != nil {
				return err
			}
		}
		if err := r.home.endWriteBack(r); err != nil {
			return err
		}
	}
	if firstStatic {
		r.staticKnown = true
	}
	if r.recordOrder {
		r.recordOrder = false
		r.rebuildPending = true
	}
	r.iterations++
	r.recordStats(bwdEnd, waitStart, waitEnd)
	return nil
}

func (r *reducer) recordStats(bwdEnd, waitStart, waitEnd time.Time) {
	spans := make([][2]time.Time, 0, len(r.buckets))
	per := make([]time.Duration, len(r.buckets))
	for i, b := range r.buckets {
		if b.launched && b.done == nil {
			// Stream-ordered: the host never sees it end, so its span
			// ends at finalize, which did not wait for it (the device's
			// own timeline has the real end).
			b.doneAt = bwdEnd
		}
		spans = append(spans, [2]time.Time{b.launchAt, b.doneAt})
		per[i] = b.doneAt.Sub(b.launchAt)
	}
	it := IterStats{
		Backward:   bwdEnd.Sub(r.prepared),
		CommWait:   waitEnd.Sub(waitStart) + r.inlineWait,
		Comm:       unionLength(spans),
		BucketComm: per,
	}
	if r.stats != nil {
		r.stats.endIteration(it)
	}
	if r.timeline != nil {
		r.timeline.record("backward", "compute", tidCompute, r.prepared, bwdEnd.Sub(r.prepared), nil)
		if d := waitEnd.Sub(waitStart); d > 0 {
			r.timeline.record("finalize wait", "comm", tidCompute, waitStart, d, nil)
		}
	}
}

// unusedError is the long, actionable error torch gives when a parameter
// got no gradient without find_unused_parameters.
func (r *reducer) unusedError(missing []int) error {
	names := make([]string, 0, len(missing))
	idx := make([]string, 0, len(missing))
	for _, i := range missing {
		names = append(names, r.params[i].name)
		idx = append(idx, fmt.Sprint(i))
	}
	return fmt.Errorf("%w: on rank %d, %d of %d parameters received no gradient in this backward pass: %s (parameter indices %s). "+
		"This usually means the module has parameters that were not used in producing the loss. "+
		"Pass ddp.FindUnusedParameters(true) to ddp.Wrap to allow this, and make sure that every output of Forward takes part in computing the loss. "+
		"If the same parameters are unused in every iteration, ddp.StaticGraph(true) is cheaper; a parameter that is never trained can be excluded with SetRequiresGrad(false) before Wrap",
		ErrUnusedParameters, r.pg.Rank(), len(missing), len(r.params), strings.Join(names, ", "), strings.Join(idx, " "))
}

// shadowBackward issues the collectives of one synchronised backward with
// zero gradients, for a rank that has joined (ran out of inputs) while others
// still train (torch's _match_all_reduce_for_bwd_pass).
func (r *reducer) shadowBackward(div float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetIteration()
	r.div = div
	r.shadowing = true
	defer func() { r.shadowing = false }()
	for _, b := range r.buckets {
		b.zero()
		b.pending = 0
	}
	r.launchReady() // all buckets, in order, plus the used map when due
	err := r.waitLaunched()
	if r.cfg.staticGraph {
		r.staticKnown = true
	}
	if r.cfg.rebuild && !r.rebuilt && (r.cfg.staticGraph || !r.cfg.findUnused) {
		r.rebuildPending = true
	}
	clear(r.locallyUsed)
	return err
}

// maybeRebuild rebuilds the buckets from the order observed in the first
// synchronised iteration, as chosen by root (torch's rebuild_buckets +
// sync_bucket_indices). It is a collective when a rebuild is pending, which
// happens at the same Forward on every rank.
func (r *reducer) maybeRebuild(root int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failure(); err != nil {
		// A stream-ordered all-reduce of an earlier iteration failed or
		// timed out: the group was aborted, so every later step fails
		// (torch's watchdog takes the process down).
		return err
	}
	if !r.rebuildPending {
		return nil
	}
	r.rebuildPending = false
	r.rebuilt = true
	order := completeOrder(r.order, len(r.params))
	wire := make([]int64, len(order))
	for i, v := range order {
		wire[i] = int64(v)
	}
	if r.pg.Size() > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.timeout)
		err := r.pg.Broadcast(backend.Int64s(wire), root).Wait(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("ddp: broadcasting the bucket order from rank %d for the rebuild: %w", root, err)
		}
	}
	got := make([]int, len(wire))
	for i, v := range wire {
		got[i] = int(v)
	}
	got = completeOrder(got, len(r.params))
	assign := assignBuckets(got, r.params, mbToBytes(r.cfg.firstBucketCapMB), mbToBytes(r.cfg.bucketCapMB))
	if slices.EqualFunc(assign, r.assignment(), slices.Equal[[]int]) {
		return nil
	}
	r.build(assign)
	return r.buildErr
}

func (r *reducer) assignment() [][]int {
	a := make([][]int, len(r.buckets))
	for i, b := range r.buckets {
		a[i] = b.params
	}
	return a
}
