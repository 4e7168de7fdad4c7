package devtensor

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goddp/goddp/tensor"
)

// Mem is device memory as a Launcher allocates it.
type Mem interface {
	// Ptr is its device address.
	Ptr() uint64
}

// Launcher is what a device gives devtensor: every method but Synchronize
// and CopyDtoH enqueues on the device's compute stream and returns.
type Launcher interface {
	String() string
	// Alloc returns bytes of zeroed device memory.
	Alloc(bytes int) (Mem, error)
	// FreeAsync frees m after the work queued so far.
	FreeAsync(m Mem)
	// CopyHtoD copies src to dst at byte offset off; src may be reused as
	// soon as it returns.
	CopyHtoD(dst Mem, off int, src []byte)
	// CopyDtoH waits for the queued work and copies len(dst) bytes of src
	// from byte offset off, returning the stream's first error.
	CopyDtoH(dst []byte, src Mem, off int) error
	// CopyDtoD copies n bytes.
	CopyDtoD(dst Mem, dstOff int, src Mem, srcOff, n int)
	// Launch runs a kernels.cu kernel over grid blocks of block threads
	// with 8-byte arguments (pointers, int64 counts, float32 bits).
	Launch(kernel string, grid, block int, args ...uint64) error
	// Sgemm is tensor.Gemm on float32 device matrices at byte offsets.
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a Mem, aOff, lda int,
		b Mem, bOff, ldb int, beta float32, c Mem, cOff, ldc int)
	// Synchronize waits for the queued work and returns the first error.
	Synchronize() error
}

// BatchedLauncher is a Launcher with a strided-batched GEMM (cuBLAS's
// SgemmStridedBatched): batch products whose operands start sa, sb, sc
// elements after the previous one's, in one call. A Launcher without it
// gets a loop of Sgemm calls.
// SgemmStridedBatched returns false, having queued nothing, when the device
// behind the launcher has no such call after all.
type BatchedLauncher interface {
	SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a Mem, aOff, lda, sa int,
		b Mem, bOff, ldb, sb int, beta float32, c Mem, cOff, ldc, sc, batch int) bool
}

// Device is a tensor.Device over a Launcher. Use one Device per device:
// tensors are on the same device when their Device is the same value.
//
// Its memory comes from a caching allocator (tensor.CachingAllocator) over
// the launcher's Alloc and FreeAsync, as PyTorch's CUDA caching allocator
// over cudaMalloc: a tensor's block goes back to the compute stream's free
// list of its size class (no device call) when its storage is released (a
// tensor.Recycler: the autograd graph's intermediates at the end of a
// step; ReleaseScratch: an op's temporaries) or, failing that, when the
// garbage collector takes it, and the next tensor of that class reuses it,
// zeroed by a kernel on the compute stream, which runs after every use of
// the block's last owner. Only EmptyCache, or an allocation that fails for
// want of memory (emptied and retried once), frees blocks for real.
// SetMemoryLimit caps what the allocator reserves.
type Device struct {
	l      Launcher
	k      tensor.Kernels
	cache  *tensor.CachingAllocator[Mem]
	poison atomic.Bool // PoisonEmpty
	multi  multiTables // multitensor.go
}

// New returns the tensor device of l.
func New(l Launcher) *Device {
	d := &Device{l: l, cache: tensor.NewCachingAllocator[Mem](memBackend{l})}
	d.k = d.kernels()
	d.convKernels(&d.k)
	d.multiTensorKernels(&d.k)
	d.axisKernels(&d.k)
	d.geluTanhKernels(&d.k)
	return d
}

// memBackend gets and frees the device's real blocks for the cache.
type memBackend struct{ l Launcher }

func (b memBackend) Alloc(size int) (Mem, error) { return b.l.Alloc(size) }
func (b memBackend) Free(m Mem, _ int)           { b.l.FreeAsync(m) }

// MemoryStats implements tensor.MemoryManager: the caching allocator's
// counters, in bytes of size classes.
func (d *Device) MemoryStats() tensor.MemoryStats { return d.cache.Stats() }

// SetMemoryLimit implements tensor.MemoryLimiter: the caching allocator
// reserves at most bytes (0: no cap), collecting garbage first when a
// request would pass it.
func (d *Device) SetMemoryLimit(bytes int64) { d.cache.SetLimit(bytes) }

// EmptyCache implements tensor.MemoryManager: every cached block is freed
// through the launcher (after the work queued on it).
func (d *Device) EmptyCache() { d.cache.EmptyCache() }

// Launcher returns the device's launcher.
func (d *Device) Launcher() Launcher { return d.l }

// Queues implements tensor.QueueProvider with the launcher's queues, when
// it has them (a Launcher that is itself a tensor.QueueProvider).
func (d *Device) Queues() (tensor.QueueDevice, error) {
	if p, ok := d.l.(tensor.QueueProvider); ok {
		return p.Queues()
	}
	return nil, fmt.Errorf("%w: %v", tensor.ErrNoQueues, d)
}

func (d *Device) String() string           { return d.l.String() }
func (d *Device) Kernels() *tensor.Kernels { return &d.k }
func (d *Device) Synchronize() error       { return d.l.Synchronize() }

// Close releases the device behind the launcher when the launcher can be
// closed (sim's device, cuda's Context): a program that opened the device
// by name (tensor.OpenDevice) closes it this way. Tensors on the device
// become invalid.
func (d *Device) Close() error {
	if c, ok := d.l.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// storage is a tensor's device memory: a cached block, back to the cache
// when the storage is released (Release) or, failing that, collected.
type storage struct {
	dev   *Device
	mem   Mem
	n     int // float32 elements
	class int // the block's size class, in bytes
	uses  *streamUses
}

// Release implements tensor.ReleasableStorage: the block goes back to the
// cache now (after the events RecordStream listed, as when the storage is
// collected), and the storage is refused as an operand from then on.
func (s *storage) Release() int64 {
	if !(cachedBlock{s.dev.cache, s.mem, s.class, s.uses}).release() {
		return 0
	}
	return int64(s.class)
}

func (s *storage) Device() tensor.Device { return s.dev }

// Alloc implements tensor.Device.
func (d *Device) Alloc(n int) (tensor.Storage, error) { return d.alloc(n, true) }

// AllocEmpty implements tensor.EmptyAllocator: a block from the cache
// keeps its last owner's numbers (no fill), unless PoisonEmpty is on.
func (d *Device) AllocEmpty(n int) (tensor.Storage, error) { return d.alloc(n, false) }

// PoisonEmpty makes AllocEmpty fill its memory with NaN, fresh or cached,
// as torch's fill_uninitialized_memory does: an op that reads an element
// of its result it did not write then shows in its tests (goddp/cuda/sim
// turns it on; on a GPU the fill would cost what AllocEmpty saves).
func (d *Device) PoisonEmpty() { d.poison.Store(true) }

func (d *Device) alloc(n int, zero bool) (tensor.Storage, error) {
	m, class, fresh, err := d.cache.AllocFresh(4*max(n, 1), tensor.CacheStream(0))
	if err != nil {
		return nil, fmt.Errorf("devtensor: %v: %w", d, err)
	}
	switch {
	case n == 0:
	case !zero && d.poison.Load():
		d.launch("fill_f32", grid(n), m.Ptr(), f32(float32(math.NaN())), i64(n))
	case zero && !fresh:
		// A block from the cache holds its last owner's numbers; the
		// zeroing runs on the compute stream after that owner's work.
		d.launch("fill_f32", grid(n), m.Ptr(), f32(0), i64(n))
	}
	s := &storage{dev: d, mem: m, n: n, class: class, uses: &streamUses{}}
	runtime.AddCleanup(s, func(b cachedBlock) { b.release() }, cachedBlock{d.cache, m, class, s.uses})
	return s, nil
}

// cachedBlock is what a storage's cleanup gives back to the cache. Tensor
// ops and copies use a storage on the compute stream only, so the block
// goes back to that stream's free list at once: the next owner's work is
// queued after the last one's. A block also used on another stream
// (RecordStream) is reused only once the events recorded there completed.
type cachedBlock struct {
	cache *tensor.CachingAllocator[Mem]
	m     Mem
	class int
	uses  *streamUses
}

// streamUses lists the events after which other streams are done with a
// storage (PyTorch's record_stream), and whether its block went back to
// the cache (Release, or the cleanup). It is an object of its own so that
// the cleanup can read it without keeping the storage alive.
type streamUses struct {
	mu       sync.Mutex
	events   []tensor.Event
	released atomic.Bool
}

// queryable is an event that can say, without waiting, that it completed
// (sim's Event.Query, cuEventQuery).
type queryable interface{ Query() bool }

type queried struct{ e queryable }

func (q queried) Done() bool { return q.e.Query() }

// release gives the block back once: the first of Release and the
// cleanup does, and reports true.
func (b cachedBlock) release() bool {
	if b.uses.released.Swap(true) {
		return false
	}
	b.free()
	return true
}

func (b cachedBlock) free() {
	b.uses.mu.Lock()
	events := b.uses.events
	b.uses.mu.Unlock()
	if len(events) == 0 {
		b.cache.Free(b.m, b.class, tensor.CacheStream(0))
		return
	}
	ce := make([]tensor.CacheEvent, 0, len(events))
	for _, e := range events {
		q, ok := e.(queryable)
		if !ok {
			// An event that cannot be polled: wait for them all off the
			// cleanup goroutine, then give the block back.
			go func() {
				for _, e := range events {
					e.Synchronize()
				}
				b.cache.Free(b.m, b.class, tensor.CacheStream(0))
			}()
			return
		}
		ce = append(ce, queried{q})
	}
	b.cache.FreeAfter(b.m, b.class, tensor.CacheStream(0), ce)
}

// RecordStream implements tensor.StreamRecorder: t's storage is used on
// another stream until e (recorded there after that use) completes, so
// when t is collected its block is reused only after e, never by work a
// stream could run before the other stream's (torch's record_stream).
func (d *Device) RecordStream(t *tensor.Tensor, e tensor.Event) {
	s, _ := t.Storage()
	st, ok := s.(*storage)
	if !ok || st.dev != d || e == nil {
		return
	}
	st.uses.mu.Lock()
	st.uses.events = append(st.uses.events, e)
	st.uses.mu.Unlock()
}

func (d *Device) own(s tensor.Storage) (*storage, error) {
	st, ok := s.(*storage)
	if !ok || st.dev != d {
		return nil, fmt.Errorf("devtensor: storage of %v used on %v%s", s.Device(), d, releasedNote(s))
	}
	if st.uses.released.Load() {
		return nil, fmt.Errorf("devtensor: storage on %v used after it was released%s", d, releasedNote(nil))
	}
	return st, nil
}

// releasedNote explains a storage a Recycler gave back (tensor.Recycler
// puts a stand-in of another type in the headers it detaches).
func releasedNote(s tensor.Storage) string {
	if _, ok := s.(*storage); s != nil && ok {
		return ""
	}
	return " (a tensor whose storage was released: the autograd graph that made it was freed)"
}

// Upload implements tensor.Device.
func (d *Device) Upload(dst tensor.Storage, off int, src []float32) error {
	st, err := d.own(dst)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > st.n {
		return fmt.Errorf("devtensor: upload of %d elements at %d into %d on %v", len(src), off, st.n, d)
	}
	d.l.CopyHtoD(st.mem, 4*off, f32Bytes(src))
	runtime.KeepAlive(st)
	return nil
}

// Download implements tensor.Device.
func (d *Device) Download(dst []float32, src tensor.Storage, off int) error {
	st, err := d.own(src)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > st.n {
		return fmt.Errorf("devtensor: download of %d elements at %d from %d on %v", len(dst), off, st.n, d)
	}
	err = d.l.CopyDtoH(f32Bytes(dst), st.mem, 4*off)
	runtime.KeepAlive(st)
	return err
}

// MemOf returns the device memory behind a tensor on a devtensor device and
// the byte offset at which the tensor starts in it, for code that moves
// tensors with the device's own calls (DDP's buckets).
func MemOf(t *tensor.Tensor) (Mem, int, bool) {
	s, off := t.Storage()
	st, ok := s.(*storage)
	if !ok {
		return nil, 0, false
	}
	return st.mem, 4 * off, true
}

// Of returns the devtensor Device a tensor.Device is, if it is one.
func Of(d tensor.Device) (*Device, bool) {
	dd, ok := d.(*Device)
	return dd, ok
}

// hostBytes views integers as the bytes a host-to-device copy sends.
func hostBytes[T int32 | int64](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), int(unsafe.Sizeof(x[0]))*len(x))
}

func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// Launch configuration: 256 threads a block, blocks capped (the kernels
// loop grid-stride over the rest).
const (
	block   = 256
	maxGrid = 1 << 20
)

func grid(n int) int { return max(1, min((n+block-1)/block, maxGrid)) }

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func i64(n int) uint64     { return uint64(int64(n)) }
func flag(b bool) uint64 {
	if b {
		return f32(1)
	}
	return f32(0)
}

// ptr is t's device address; t must be a contiguous float32 tensor on d.
func (d *Device) ptr(op string, t *tensor.Tensor) uint64 {
	s, off := t.Storage()
	st, err := d.own(s)
	if err != nil {
		panic(fmt.Sprintf("devtensor: %s: %v", op, err))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("devtensor: %s: operand of shape %v is a non-contiguous view; %s", op, t.Shape(), tensor.NoKernel("contiguous", d)))
	}
	return st.mem.Ptr() + 4*uint64(off)
}

func (d *Device) mem(op string, t *tensor.Tensor) (Mem, int) {
	d.ptr(op, t)
	m, off, _ := MemOf(t)
	return m, off
}

func (d *Device) launch(kernel string, grid int, args ...uint64) {
	if err := d.l.Launch(kernel, grid, block, args...); err != nil {
		// A rejected launch is a bug in this package, not a runtime state.
		panic(fmt.Sprintf("devtensor: %v", err))
	}
}

func same(op string, ts ...*tensor.Tensor) int {
	n := ts[0].Numel()
	for _, t := range ts[1:] {
		if t.Numel() != n {
			panic(fmt.Sprintf("devtensor: %s: operands of %d and %d elements", op, n, t.Numel()))
		}
	}
	return n
}

func rowsCols(t *tensor.Tensor) (int, int) {
	if t.Dim() == 0 {
		return 1, 1
	}
	c := t.Size(-1)
	if c == 0 {
		return 0, 0
	}
	return t.Numel() / c, c
}
