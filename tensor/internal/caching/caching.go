// Package caching is goddp's caching allocator, shaped after PyTorch's CUDA
// caching allocator and tinygrad's LRUAllocator: a freed block goes back to
// a free list of its size class instead of to the system, and the next
// request of that class takes it from there. Only EmptyCache hands cached
// blocks back for real.
//
// The allocator does not know what memory is: a device parametrises it with
// how to get and free a real block (Backend), so the host (Go heap slices),
// sim and cuda (cuMemAlloc) share one implementation and one set of stats.
//
// Streams: free lists are kept per stream, so a block freed on the stream
// that used it is reused on that stream at once (work on one stream runs in
// order, so the next user cannot overtake the last). A block used on another
// stream too is freed with FreeAfter and the events recorded on those
// streams; it joins a free list only once every event has completed, which
// is PyTorch's record_stream. The host has one stream and no events.
package caching

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"time"
)

// Stream names an ordered queue of device work. The host uses DefaultStream
// only.
type Stream uint64

// DefaultStream is a device's compute stream, and the host's only one.
const DefaultStream Stream = 0

// Event marks a point in a stream's work; Done reports (without blocking)
// whether the work before it has completed.
type Event interface{ Done() bool }

// Backend gets and frees real blocks of a device's memory. Alloc is asked
// for a class size (Class), never an odd one; Free receives only blocks Alloc
// returned, with the size they were asked for.
type Backend[B any] interface {
	Alloc(size int) (B, error)
	Free(b B, size int)
}

// Stats is what the allocator has done, in bytes of class sizes.
type Stats struct {
	Allocated     int64 // handed out and not freed
	Reserved      int64 // held from the backend: allocated plus cached
	PeakAllocated int64 // the largest Allocated has been
	PeakReserved  int64 // the largest Reserved has been
	Hits          int64 // requests served from a free list
	Misses        int64 // requests that went to the backend
	Frees         int64 // blocks given back to the allocator
}

func (s Stats) String() string {
	return fmt.Sprintf("allocated %s (peak %s), reserved %s (peak %s), %d hits, %d misses",
		human(s.Allocated), human(s.PeakAllocated), human(s.Reserved), human(s.PeakReserved), s.Hits, s.Misses)
}

func human(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// Allocator caches a device's blocks by (stream, size class). It is safe for
// concurrent use; no lock is held while the backend allocates or frees, so a
// slow cuMemFree does not stall other streams' allocations.
type Allocator[B any] struct {
	backend Backend[B]

	mu       sync.Mutex
	free     map[poolKey][]B
	deferred []deferredBlock[B] // freed blocks waiting on other streams' events
	stats    Stats
	// tick counts Tick calls (phase boundaries: a training step's end);
	// used[key] is the tick at which key's free list last served or took
	// a block. A list idle for idleTicks ticks is released (Tick).
	tick int64
	used map[poolKey]int64
	// limit caps Reserved (0: no cap), torch's
	// set_per_process_memory_fraction as a byte count (SetLimit).
	limit int64
}

// ErrLimit is the error an allocation wraps when it would take the
// allocator's reserved memory past its limit (SetLimit) even after the
// garbage collector found what it could.
var ErrLimit = errors.New("memory limit reached")

// SetLimit caps the memory the allocator reserves from its backend at
// bytes (0 removes the cap), as torch.cuda.set_per_process_memory_fraction
// caps its allocator. A request that would cross it is served from what
// the garbage collector frees first: on a device, tensors nothing
// references give their blocks back only when the collector finds them,
// and Go's heap goal knows nothing of device memory, so without a cap a
// training loop's device footprint is whatever garbage builds up between
// two collections the host heap triggered. Only when that is not enough
// does the request fail, with ErrLimit. Blocks already reserved beyond a
// new, lower cap stay until they are freed or the cache is emptied.
func (a *Allocator[B]) SetLimit(bytes int64) {
	a.mu.Lock()
	a.limit = max(bytes, 0)
	a.mu.Unlock()
}

// Limit returns the cap SetLimit set (0: none).
func (a *Allocator[B]) Limit() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

type poolKey struct {
	stream Stream
	class  int
}

type deferredBlock[B any] struct {
	b      B
	key    poolKey
	events []Event
}

// New returns an empty allocator over backend.
func New[B any](backend Backend[B]) *Allocator[B] {
	return &Allocator[B]{backend: backend, free: make(map[poolKey][]B), used: make(map[poolKey]int64)}
}

// DefaultIdleTicks is how many Tick calls a size class's free list may go
// unused before Tick releases its blocks: two training steps when Tick is
// called at the end of backward and again when the step's graph is freed.
const DefaultIdleTicks = 4

// Class is the size class of a request of size bytes: the size a block
// serving it has. Sizes round up to 64 bytes, then to one of eight steps per
// power of two (at most 12.5% waste), so that tensors of one shape, made
// every step, always meet the blocks their predecessors freed.
func Class(size int) int {
	if size <= 64 {
		return 64
	}
	if size <= 1024 {
		return (size + 63) &^ 63
	}
	// step = 2^(floor(log2(size-1)) - 3)
	shift := bits.Len(uint(size-1)) - 4
	step := 1 << shift
	return (size + step - 1) &^ (step - 1)
}

// Alloc returns a block of at least Class(size) bytes for use on stream s,
// and its class (the size to give back): from s's free list of that class
// when it has one, else from the list of a larger class up to twice the
// size (hits), else from the backend (a miss).
// A block from the cache holds whatever its last user left in it.
func (a *Allocator[B]) Alloc(size int, s Stream) (B, int, error) {
	b, class, _, err := a.AllocFresh(size, s)
	return b, class, err
}

// AllocFresh is Alloc that also reports whether the block is fresh from the
// backend (a device's backend zeroes it) rather than from the cache (where
// it holds its last user's numbers).
func (a *Allocator[B]) AllocFresh(size int, s Stream) (B, int, bool, error) {
	class := Class(size)
	a.mu.Lock()
	if len(a.deferred) > 0 {
		a.collectLocked()
	}
	if b, c, ok := a.takeLocked(s, class); ok {
		a.mu.Unlock()
		return b, c, false, nil
	}
	a.stats.Misses++
	a.mu.Unlock()

	b, err := a.reserve(class)
	if err != nil && !errors.Is(err, ErrLimit) {
		// Out of memory, perhaps because the cache holds it: give every
		// cached block back and try once more (PyTorch's free-and-retry).
		// At the limit, the garbage collector goes first (below): the
		// blocks it frees serve the request from the cache.
		a.EmptyCache()
		b, err = a.reserve(class)
	}
	if err != nil {
		// Device tensors nothing references any more still hold their
		// blocks until the garbage collector finds them: Go's heap goal
		// knows nothing of device memory, so a device can fill with
		// garbage the collector has not been asked to find. Collect, let
		// the cleanups give the blocks back, and try again.
		var c int
		var cached bool
		if b, c, cached, err = a.allocAfterGC(s, class); err == nil && cached {
			return b, c, false, nil
		}
	}
	if err != nil {
		st := a.Stats()
		var zero B
		return zero, 0, false, fmt.Errorf("caching: allocating %d bytes (class %d) failed after emptying the cache and collecting garbage, with %d bytes in use and %d reserved: %w",
			size, class, st.Allocated, st.Reserved, err)
	}
	a.mu.Lock()
	a.addAllocatedLocked(int64(class))
	a.mu.Unlock()
	return b, class, true, nil
}

// takeLocked serves a request of class bytes on stream s from the cache:
// s's free list of that class, else the best fit among the next larger
// classes, up to twice the size (a cached block that is idle now serves
// the request instead of a new one: the sum of each class's own peak is
// more than the peak of the sum). The block keeps its class, and goes back
// to that list. ok is false when no list has one.
func (a *Allocator[B]) takeLocked(s Stream, class int) (b B, c int, ok bool) {
	for c = class; c <= 2*class; c = Class(c + 1) {
		k := poolKey{s, c}
		if l := a.free[k]; len(l) > 0 {
			b = l[len(l)-1]
			var zero B
			l[len(l)-1] = zero
			a.free[k] = l[:len(l)-1]
			a.used[k] = a.tick
			a.stats.Hits++
			a.addAllocatedLocked(int64(c))
			return b, c, true
		}
	}
	return b, 0, false
}

// reserve gets a block of class bytes from the backend, within the limit.
func (a *Allocator[B]) reserve(class int) (B, error) {
	var zero B
	a.mu.Lock()
	if a.limit > 0 && a.stats.Reserved+int64(class) > a.limit {
		r, l := a.stats.Reserved, a.limit
		a.mu.Unlock()
		return zero, fmt.Errorf("%w: %d bytes reserved and %d more would pass the limit of %d", ErrLimit, r, class, l)
	}
	a.stats.Reserved += int64(class) // counted before the call, so that concurrent requests see it
	a.mu.Unlock()
	b, err := a.backend.Alloc(class)
	a.mu.Lock()
	if err != nil {
		a.stats.Reserved -= int64(class)
	} else {
		a.stats.PeakReserved = max(a.stats.PeakReserved, a.stats.Reserved)
	}
	a.mu.Unlock()
	return b, err
}

func (a *Allocator[B]) addAllocatedLocked(n int64) {
	a.stats.Allocated += n
	a.stats.PeakAllocated = max(a.stats.PeakAllocated, a.stats.Allocated)
}

// Free returns b, of class bytes (as Alloc returned), to stream s's free
// list: every use of b was on s, so the next user on s runs after them.
func (a *Allocator[B]) Free(b B, class int, s Stream) {
	a.mu.Lock()
	a.putLocked(b, poolKey{s, class})
	a.mu.Unlock()
}

// Forget accounts for a block of class bytes that was in use and is gone
// without Free: on the host, a tensor the garbage collector took. It is
// neither allocated nor reserved any more.
func (a *Allocator[B]) Forget(class int) {
	a.mu.Lock()
	a.stats.Allocated -= int64(class)
	a.stats.Reserved -= int64(class)
	a.mu.Unlock()
}

// FreeAfter returns b, allocated on stream s and used on other streams too,
// to s's free list once every event in events (recorded on those streams
// after their last use of b) is done. Until then no stream gets it.
func (a *Allocator[B]) FreeAfter(b B, class int, s Stream, events []Event) {
	a.mu.Lock()
	a.stats.Allocated -= int64(class)
	a.stats.Frees++
	a.deferred = append(a.deferred, deferredBlock[B]{b, poolKey{s, class}, append([]Event(nil), events...)})
	a.mu.Unlock()
}

func (a *Allocator[B]) putLocked(b B, key poolKey) {
	a.stats.Allocated -= int64(key.class)
	a.stats.Frees++
	a.free[key] = append(a.free[key], b)
	a.used[key] = a.tick
}

// collectLocked moves deferred blocks whose events have all completed to
// their free lists.
func (a *Allocator[B]) collectLocked() {
	kept := a.deferred[:0]
	for _, d := range a.deferred {
		done := true
		for _, e := range d.events {
			if !e.Done() {
				done = false
				break
			}
		}
		if done {
			a.free[d.key] = append(a.free[d.key], d.b)
			a.used[d.key] = a.tick
		} else {
			kept = append(kept, d)
		}
	}
	clear(a.deferred[len(kept):])
	a.deferred = kept
}

// EmptyCache frees every cached block (those on free lists, and deferred
// ones whose events are done) through the backend, as
// torch.cuda.empty_cache. Blocks in use are not touched.
func (a *Allocator[B]) EmptyCache() {
	a.mu.Lock()
	a.collectLocked()
	free := a.free
	a.free = make(map[poolKey][]B)
	clear(a.used)
	for key, l := range free {
		a.stats.Reserved -= int64(key.class) * int64(len(l))
	}
	a.mu.Unlock()
	// Outside the lock: a real free may be slow or synchronise the device.
	for key, l := range free {
		for _, b := range l {
			a.backend.Free(b, key.class)
		}
	}
}

// Tick marks a phase boundary (the end of a training step) and releases,
// through the backend, the cached blocks of every size class whose free
// list has neither served nor taken a block in the last idleTicks ticks:
// a class used once (the last, shorter batch of an epoch, an evaluation
// pass) stops holding memory, while the classes every step uses keep
// theirs. It returns the bytes released.
func (a *Allocator[B]) Tick(idleTicks int) int64 {
	a.mu.Lock()
	a.tick++
	if len(a.deferred) > 0 {
		a.collectLocked()
	}
	var drop map[poolKey][]B
	var n int64
	for key, l := range a.free {
		if a.tick-a.used[key] <= int64(idleTicks) {
			continue
		}
		if len(l) > 0 {
			if drop == nil {
				drop = make(map[poolKey][]B)
			}
			drop[key] = l
			n += int64(key.class) * int64(len(l))
		}
		delete(a.free, key)
		delete(a.used, key)
	}
	a.stats.Reserved -= n
	a.mu.Unlock()
	for key, l := range drop {
		for _, b := range l {
			a.backend.Free(b, key.class)
		}
	}
	return n
}

// Stats returns a snapshot of the allocator's counters.
func (a *Allocator[B]) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// ResetPeak sets the peaks to the current values, to measure a phase.
func (a *Allocator[B]) ResetPeak() {
	a.mu.Lock()
	a.stats.PeakAllocated, a.stats.PeakReserved = a.stats.Allocated, a.stats.Reserved
	a.mu.Unlock()
}

// gcRetries bounds allocAfterGC's waits for the cleanups of collected
// tensors, which run on the runtime's cleanup goroutine after runtime.GC
// returns; each wait is a millisecond, and a retry follows each.
const gcRetries = 50

// allocAfterGC runs the garbage collector, then retries the request while
// the collected tensors' cleanups return their blocks: from the cache
// (cached is true: the request is a hit after all), else from the
// backend, giving the cache back first from the second try on (the blocks
// the cleanups returned may all be of other classes).
func (a *Allocator[B]) allocAfterGC(s Stream, class int) (b B, c int, cached bool, err error) {
	runtime.GC()
	for i := range gcRetries {
		a.mu.Lock()
		if len(a.deferred) > 0 {
			a.collectLocked()
		}
		if b, c, ok := a.takeLocked(s, class); ok {
			a.stats.Misses--
			a.mu.Unlock()
			return b, c, true, nil
		}
		a.mu.Unlock()
		if i > 0 {
			a.EmptyCache()
		}
		if b, err = a.reserve(class); err == nil {
			return b, class, false, nil
		}
		time.Sleep(time.Millisecond)
	}
	return b, 0, false, err
}
