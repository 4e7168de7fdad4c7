package tensor

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/goddp/goddp/tensor/internal/caching"
)

// MemoryStats is a device allocator's counters (bytes are size-class
// bytes): Allocated in use, Reserved held (in use plus cached), their peaks,
// and the requests served from the cache (Hits) or from the system (Misses).
type MemoryStats = caching.Stats

// CachingAllocator is the caching allocator every device builds on
// (tensor/internal/caching): size-class free lists per stream, a block used
// on another stream reused only after that stream's event (FreeAfter),
// stats and EmptyCache. A device supplies a CacheBackend that gets and
// frees its real blocks (cuMemAlloc/cuMemFree on cuda). The host's is
// HostAllocator; the aliases let device packages outside tensor use the one
// implementation.
type CachingAllocator[B any] = caching.Allocator[B]

// CacheBackend gets and frees a device's real blocks for a CachingAllocator.
type CacheBackend[B any] = caching.Backend[B]

// CacheStream names a device stream's free lists (0 is the compute stream).
type CacheStream = caching.Stream

// CacheEvent is an event recorded on a stream, polled before a block used
// there is reused on another.
type CacheEvent = caching.Event

// NewCachingAllocator returns an empty caching allocator over backend.
func NewCachingAllocator[B any](backend CacheBackend[B]) *CachingAllocator[B] {
	return caching.New(backend)
}

// HostAllocator is the CPU device's caching allocator: every host tensor's
// storage comes from it. A block given back (Recycle, which the autograd
// engine calls for the storage a backward pass no longer needs) is kept on
// a free list of its size class and serves the next tensor of that class,
// so a steady training loop stops allocating. A block never given back is
// an ordinary Go object: the garbage collector frees it as before, because
// the allocator keeps no reference to blocks in use.
type HostAllocator struct {
	f32 *caching.Allocator[[]float32]
	f64 *caching.Allocator[[]float64]
	i64 *caching.Allocator[[]int64] // Int64 tensors' own blocks: no float64 holds their bits
	// poison fills every block given back with NaN, so that a read after
	// Recycle (a tensor recycled while still in use) shows in results.
	poison atomic.Bool
}

// host is the CPU's allocator. It is package state only because the host
// device is one per process; it is reached through CPU()'s Allocator method
// and it and kernelRecorder (kernelprofile.go) are the only mutable
// objects of the kind in the package.
var host = newHostAllocator()

func newHostAllocator() *HostAllocator {
	return &HostAllocator{
		f32: caching.New[[]float32](hostBackend[float32]{}),
		f64: caching.New[[]float64](hostBackend[float64]{}),
		i64: caching.New[[]int64](hostBackend[int64]{}),
	}
}

// hostBackend gets blocks from the Go heap. Free has nothing to do: the
// garbage collector reclaims a dropped block once nothing points at it.
type hostBackend[T hostElem] struct{}

// hostElem is an element type of host storage.
type hostElem interface{ ~float32 | ~float64 | ~int64 }

func (hostBackend[T]) Alloc(size int) ([]T, error) {
	var z T
	return make([]T, size/sizeOf(z)), nil
}

func (hostBackend[T]) Free([]T, int) {}

func sizeOf[T hostElem](z T) int {
	if _, ok := any(z).(float32); ok {
		return 4
	}
	return 8
}

// Allocator returns the host's caching allocator.
func (cpuDevice) Allocator() *HostAllocator { return host }

// Host returns the host's caching allocator (CPU().Allocator() without the
// type assertion).
func Host() *HostAllocator { return host }

// Stats returns the allocator's counters, float32, float64 and int64
// blocks together.
func (h *HostAllocator) Stats() MemoryStats {
	a, b, c := h.f32.Stats(), h.f64.Stats(), h.i64.Stats()
	return MemoryStats{
		Allocated:     a.Allocated + b.Allocated + c.Allocated,
		Reserved:      a.Reserved + b.Reserved + c.Reserved,
		PeakAllocated: a.PeakAllocated + b.PeakAllocated + c.PeakAllocated,
		PeakReserved:  a.PeakReserved + b.PeakReserved + c.PeakReserved,
		Hits:          a.Hits + b.Hits + c.Hits,
		Misses:        a.Misses + b.Misses + c.Misses,
		Frees:         a.Frees + b.Frees + c.Frees,
	}
}

// EmptyCache drops every cached block and gives the memory back to the
// system (torch.cuda.empty_cache): the garbage collector runs, so that its
// heap goal, which counted the cached blocks as live, falls with them, and
// the freed pages are returned (debug.FreeOSMemory). Tensors in use are not
// touched. It costs a full collection: call it between phases (after
// training, before generation or evaluation at other shapes), not per step.
func (h *HostAllocator) EmptyCache() {
	h.f32.EmptyCache()
	h.f64.EmptyCache()
	h.i64.EmptyCache()
	debug.FreeOSMemory()
}

// Tick marks the end of a phase of work (Recycler.Flush calls it at the
// end of every backward pass and FreeGraph): the cached blocks of size
// classes unused for the last caching.DefaultIdleTicks ticks (about two
// training steps) go to the garbage collector, so that shapes seen once (an
// epoch's last, shorter batch; an evaluation pass) do not stay reserved for
// the rest of the run. It returns the bytes released.
func (h *HostAllocator) Tick() int64 {
	return h.f32.Tick(caching.DefaultIdleTicks) + h.f64.Tick(caching.DefaultIdleTicks) + h.i64.Tick(caching.DefaultIdleTicks)
}

// ResetPeak sets the peaks to the current values.
func (h *HostAllocator) ResetPeak() {
	h.f32.ResetPeak()
	h.f64.ResetPeak()
	h.i64.ResetPeak()
}

// SetPoison switches the debug mode in which every recycled block is filled
// with NaN, so that a tensor read after its storage was recycled changes
// results instead of silently reading another tensor's numbers.
func (h *HostAllocator) SetPoison(on bool) { h.poison.Store(on) }

// hostBlock is one block handed out by the host allocator, shared by the
// tensor made on it and every view of that tensor (they copy the pointer).
// A fresh hostBlock is made per hand-out, so a header left over from an
// earlier owner of the memory never sees freed turn false again.
type hostBlock struct {
	f32   []float32 // the whole block (class bytes), for float32 tensors
	f64   []float64 // likewise for float64
	i64   []int64   // and for int64
	class int
	// freed is set when the block goes back to the cache. It is a separate
	// object so that the cleanup run when the tensor is dropped can read it
	// without keeping the hostBlock alive.
	freed *atomic.Bool
}

// dropped is the cleanup of a hostBlock: a tensor dropped without being
// recycled leaves its memory to the garbage collector, and the stats stop
// counting it as allocated and reserved.
func dropped(d droppedBlock) {
	if !d.freed.Load() {
		switch d.dtype {
		case Float64:
			host.f64.Forget(d.class)
		case Int64:
			host.i64.Forget(d.class)
		default:
			host.f32.Forget(d.class)
		}
	}
}

type droppedBlock struct {
	freed *atomic.Bool
	class int
	dtype DType
}

// cachedMin is the size in bytes below which storage comes from make: the
// Go allocator serves small objects faster than a locked free list, and they
// are a negligible share of a step's bytes.
const cachedMin = 1 << 10

// newStorage returns a host tensor of dt and shape with storage from the
// cache. zero says the elements must read as zero; otherwise the caller
// writes every element before the tensor is read (a recycled block holds its
// last user's numbers, and a fresh one is zeroed by the Go allocator anyway).
func newStorage(dt DType, zero bool, shape ...int) *Tensor {
	n := numel(shape)
	if n*dt.Size() < cachedMin {
		switch dt {
		case Float64:
			return FromF64(make([]float64, n), shape...)
		case Int64:
			return FromI64(make([]int64, n), shape...)
		}
		return FromF32(make([]float32, n), shape...)
	}
	var t *Tensor
	blk := &hostBlock{freed: new(atomic.Bool)}
	switch dt {
	case Float64:
		b, class, err := host.f64.Alloc(n*8, caching.DefaultStream)
		if err != nil {
			panic(fmt.Sprintf("tensor: %v", err))
		}
		blk.f64, blk.class = b, class
		if zero {
			clear(b[:n])
		}
		t = FromF64(b[:n:n], shape...)
	case Int64:
		b, class, err := host.i64.Alloc(n*8, caching.DefaultStream)
		if err != nil {
			panic(fmt.Sprintf("tensor: %v", err))
		}
		blk.i64, blk.class = b, class
		if zero {
			clear(b[:n])
		}
		t = FromI64(b[:n:n], shape...)
	default:
		b, class, err := host.f32.Alloc(n*4, caching.DefaultStream)
		if err != nil {
			panic(fmt.Sprintf("tensor: %v", err))
		}
		blk.f32, blk.class = b, class
		if zero {
			clear(b[:n])
		}
		t = FromF32(b[:n:n], shape...)
	}
	t.blk = blk
	runtime.AddCleanup(blk, dropped, droppedBlock{blk.freed, blk.class, dt})
	return t
}

// newFull returns a tensor whose elements are not zeroed: the caller must
// write every one of them before the tensor is returned or read. Outputs of
// ops that overwrite all their elements (binary's, unary's) use it, because
// zeroing a 100 MB tensor costs as much as writing it; a block from the
// cache is handed over as its last user left it.
func newFull(dt DType, shape ...int) *Tensor { return newStorage(dt, false, shape...) }

// A Recycler gives storage back to the host cache, or to a device's
// (ReleasableStorage), when its owner (the autograd engine after backward)
// knows the tensors are dead. Tensors added with Keep protect their
// storage: a tensor added with Free whose storage a kept tensor shares (a
// view of a parameter, a gradient adopted as Grad) is left alone. Storage
// not made by the cache (FromF32 on the caller's slice, small tensors) is
// never recycled.
//
// Recycling is safe only for tensors nothing outside the owner can reach;
// Flush detaches the headers it recycles (their elements can no longer be
// read), and any other header on the same block (a view made outside the
// owner's knowledge) panics on F32, F64, At and Item instead of reading
// another tensor's numbers; on a device, the device refuses it as an
// operand.
//
// Within a phase, Hold and Drop count the references an owner still has
// to a storage block (the autograd engine's pending gradients and the
// values of graph nodes whose backward has not run), and Recycle gives
// back at once what was passed to Free and is neither kept nor held, so
// that a backward pass reuses a gradient's block for the next op's
// gradient instead of holding every one until the pass ends.
type Recycler struct {
	keep    map[*hostBlock]struct{}
	keepDev map[Storage]struct{}
	free    []*Tensor
	holds   map[any]int // storage key (see storageKey) → references held
}

// storageKey is what identifies t's storage block across its views: the
// host block or the device storage; nil for storage not from a cache.
func storageKey(t *Tensor) any {
	switch {
	case t == nil:
		return nil
	case t.dev != nil:
		return t.dev.s
	case t.blk != nil:
		return t.blk
	}
	return nil
}

// Hold counts one more reference to t's storage: Recycle leaves it alone
// until as many Drops have come.
func (r *Recycler) Hold(t *Tensor) {
	if k := storageKey(t); k != nil {
		if r.holds == nil {
			r.holds = make(map[any]int)
		}
		r.holds[k]++
	}
}

// Drop takes back one Hold on t's storage (none held: nothing to do).
func (r *Recycler) Drop(t *Tensor) {
	k := storageKey(t)
	if k == nil {
		return
	}
	if n := r.holds[k]; n > 1 {
		r.holds[k] = n - 1
	} else {
		delete(r.holds, k)
	}
}

// Recycle is Flush in the middle of a phase: it recycles the storage of
// every tensor passed to Free that is neither kept nor held, and forgets
// those; the held ones stay listed for a later Recycle or Flush. The kept
// set and the holds stay, and the allocator's idle clock does not tick. It
// returns the bytes recycled.
func (r *Recycler) Recycle() int64 {
	var n int64
	rest := r.free[:0]
	for _, t := range r.free {
		if k := storageKey(t); k != nil && r.holds[k] > 0 {
			rest = append(rest, t)
			continue
		}
		n += r.recycleOne(t)
	}
	clear(r.free[len(rest):])
	r.free = rest
	return n
}

// Keep protects t's storage from this Recycler's next Flush.
func (r *Recycler) Keep(t *Tensor) {
	switch {
	case t == nil:
	case t.dev != nil:
		if r.keepDev == nil {
			r.keepDev = make(map[Storage]struct{})
		}
		r.keepDev[t.dev.s] = struct{}{}
	case t.blk != nil:
		if r.keep == nil {
			r.keep = make(map[*hostBlock]struct{})
		}
		r.keep[t.blk] = struct{}{}
	}
}

// Free marks t's storage for recycling at the next Flush.
func (r *Recycler) Free(t *Tensor) {
	if t != nil && (t.blk != nil || t.dev != nil) {
		r.free = append(r.free, t)
	}
}

// Flush recycles the storage of every tensor passed to Free and not shared
// with a kept one, then forgets both lists. It returns the bytes recycled.
// Holds end with the phase: Flush ignores and forgets them.
func (r *Recycler) Flush() int64 {
	var n int64
	for _, t := range r.free {
		n += r.recycleOne(t)
	}
	clear(r.free)
	r.free = r.free[:0]
	clear(r.keep)
	clear(r.keepDev)
	clear(r.holds)
	host.Tick()
	return n
}

// recycleOne gives t's storage back unless a kept tensor shares it, and
// detaches t. It returns the bytes recycled.
func (r *Recycler) recycleOne(t *Tensor) int64 {
	if t.dev != nil {
		return r.releaseDevice(t)
	}
	b := t.blk
	if _, kept := r.keep[b]; kept {
		return 0
	}
	var n int64
	if !b.freed.Swap(true) {
		n = int64(b.class)
		host.recycle(b)
	}
	// Detach: the storage now belongs to the cache.
	t.f32, t.f64, t.i64, t.blk = nil, nil, nil, b
	return n
}

// releaseDevice gives a device tensor's storage back to its device's cache
// unless a kept tensor shares it, and detaches the header (and the views
// that share its reference). It returns the bytes released.
func (r *Recycler) releaseDevice(t *Tensor) int64 {
	s := t.dev.s
	if _, kept := r.keepDev[s]; kept {
		return 0
	}
	return releaseDeviceStorage(t)
}

// releaseDeviceStorage gives a device tensor's storage back to its
// device's cache when the device can take it early (ReleasableStorage),
// and puts a releasedStorage in the header, which its views share. It
// returns the bytes released.
func releaseDeviceStorage(t *Tensor) int64 {
	rs, ok := t.dev.s.(ReleasableStorage)
	if !ok {
		return 0
	}
	n := rs.Release()
	t.dev.s = releasedStorage{rs.Device()}
	return n
}

// releasedStorage stands in a device tensor's header for storage a
// Recycler gave back: the device refuses it as an operand (it is not the
// device's own storage type), so reading or writing through the header
// fails instead of touching the block's next owner.
type releasedStorage struct{ dev Device }

func (s releasedStorage) Device() Device { return s.dev }

// ReleaseScratch gives t's storage back to the host cache at once, or to
// its device's (ReleasableStorage: the work already queued on it runs
// first, as the stream orders it), for the next tensor of its size class.
// t must be a temporary its caller made and no one else saw (an op's
// intermediate inside one Backward); reading t afterwards panics. Storage
// not from the cache (small tensors, tensors on a caller's slice) is left
// to the garbage collector. Recycler is the general case, for tensors
// others may share.
func ReleaseScratch(t *Tensor) {
	if t.dev != nil {
		releaseDeviceStorage(t)
		return
	}
	if b := t.blk; b != nil && !b.freed.Swap(true) {
		host.recycle(b)
		t.f32, t.f64, t.i64 = nil, nil, nil
	}
}

// recycle puts b's memory back on its free list.
func (h *HostAllocator) recycle(b *hostBlock) {
	poison := h.poison.Load()
	if b.i64 != nil {
		if poison { // no NaN in int64: the most negative value is as loud as an index
			splat(b.i64, math.MinInt64)
		}
		h.i64.Free(b.i64, b.class, caching.DefaultStream)
		return
	}
	if b.f64 != nil {
		if poison {
			splat(b.f64, math.NaN())
		}
		h.f64.Free(b.f64, b.class, caching.DefaultStream)
		return
	}
	if poison {
		splat(b.f32, float32(math.NaN()))
	}
	h.f32.Free(b.f32, b.class, caching.DefaultStream)
}

// checkLive panics when t's storage went back to the cache: reading it
// would return whatever tensor has it now.
func (t *Tensor) checkLive(op string) {
	if t.blk != nil && t.blk.freed.Load() {
		panic(fmt.Sprintf("tensor: %s on a tensor of shape %s whose storage was recycled (the autograd graph that made it was freed)", op, sh(t.shape)))
	}
}

// MemoryManager is an optional interface of a Device whose memory comes
// from a caching allocator: the cpu device (the host allocator) and the
// goddp/cuda/devtensor devices (sim, cuda) implement it.
type MemoryManager interface {
	// MemoryStats returns the allocator's counters (torch.cuda.memory_stats).
	MemoryStats() MemoryStats
	// EmptyCache gives every cached block back to the system
	// (torch.cuda.empty_cache); memory in use is not touched.
	EmptyCache()
}

// MemoryLimiter is an optional interface of a device whose caching
// allocator takes a cap (the goddp/cuda/devtensor devices: sim, cuda). The
// host's memory is Go's heap, which GOMEMLIMIT caps.
type MemoryLimiter interface {
	// SetMemoryLimit caps the memory the device's allocator reserves
	// (torch.cuda.set_per_process_memory_fraction, as bytes); 0 removes
	// the cap. At the cap, a request is served by what the garbage
	// collector frees before it fails (caching.Allocator.SetLimit).
	SetMemoryLimit(bytes int64)
}

// SetMemoryLimit caps d's reserved memory at bytes (0: no cap). It is an
// error for a device without a capped allocator (the CPU: use GOMEMLIMIT).
func SetMemoryLimit(d Device, bytes int64) error {
	m, ok := d.(MemoryLimiter)
	if !ok {
		return fmt.Errorf("%w: %v takes no memory limit (the host's is GOMEMLIMIT)", ErrDevice, d)
	}
	if bytes < 0 {
		return fmt.Errorf("%w: %v: memory limit %d is negative", ErrDevice, d, bytes)
	}
	m.SetMemoryLimit(bytes)
	return nil
}

// MemoryStatsOf returns d's allocator counters; ok is false for a device
// without a caching allocator.
func MemoryStatsOf(d Device) (s MemoryStats, ok bool) {
	m, ok := d.(MemoryManager)
	if !ok {
		return MemoryStats{}, false
	}
	return m.MemoryStats(), true
}

// EmptyCache gives d's cached blocks back to the system, when d has a
// caching allocator (MemoryManager); it does nothing otherwise. A program
// calls it between phases whose shapes differ (after training, before
// generation), or to let another process have the memory.
func EmptyCache(d Device) {
	if m, ok := d.(MemoryManager); ok {
		m.EmptyCache()
	}
}

// MemoryStats implements MemoryManager with the host allocator's counters.
func (cpuDevice) MemoryStats() MemoryStats { return host.Stats() }

// EmptyCache implements MemoryManager: the host's cached blocks go to the
// garbage collector.
func (cpuDevice) EmptyCache() { host.EmptyCache() }
