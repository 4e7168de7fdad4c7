//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/tensor"
)

// Tensors returns the context as a goddp/tensor device ("cuda:N"): tensors
// moved to it with To live in its memory, and autograd's and optim's ops
// on them run goddp's kernels and cuBLAS on the compute stream, through
// goddp/cuda/devtensor, the same op table goddp/cuda/sim runs in CI. Every
// call returns the same tensor.Device.
//
// Errors are sticky as on the simulated device: a failed launch or cuBLAS
// call is returned by the next copy to the host (Item, To(tensor.CPU()))
// or Synchronize. Memory comes from devtensor's caching allocator: a
// tensor the garbage collector finds unreachable gives its block back to
// the cache (no cuMemFree in a cleanup); EmptyCache (tensor.EmptyCache),
// or an allocation that runs out of memory, frees cached blocks with
// cuMemFree, which waits for the work that uses them. Run on an H100 by
// the GPU kit (docs/gpu.md).
func (c *Context) Tensors() tensor.Device {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	if c.tensors == nil {
		c.launcher = &launcher{c: c}
		c.tensors = devtensor.New(c.launcher)
	}
	return c.tensors
}

// launcher is devtensor's view of a Context.
type launcher struct {
	c     *Context
	mu    sync.Mutex
	err   error                   // the first failure of a call that returns none
	clock atomic.Pointer[opClock] // StartOpTimes' clock, nil when off
}

// timed starts timing one call named name on k: it waits for the stream
// to drain, and the function it returns waits again and records the time
// between.
func (l *launcher) timed(k *opClock, name string) func() {
	_ = l.c.do(l.c.dev.sync)
	t0 := time.Now()
	return func() {
		host := time.Since(t0)
		_ = l.c.do(l.c.dev.sync)
		k.add(name, time.Since(t0), host)
	}
}

// StartOpTimes times every call the context's tensor device (Tensors)
// queues from now on, waiting for the stream before and after each, until
// the returned stop, which gives the totals by call (OpTime), most time
// first. It is a profiler: the waits serialise the host with the device,
// so a run it times is slower than one it does not.
func (c *Context) StartOpTimes() (stop func() []OpTime) {
	c.Tensors()
	l := c.launcher
	k := newOpClock()
	l.clock.Store(k)
	return func() []OpTime {
		l.clock.CompareAndSwap(k, nil)
		return k.times()
	}
}

type devMem uint64

func (m devMem) Ptr() uint64 { return uint64(m) }

func (l *launcher) String() string { return l.c.String() }

func (l *launcher) sticky(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

func (l *launcher) first(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return err
}

func (l *launcher) Alloc(bytes int) (devtensor.Mem, error) {
	var p uint64
	err := l.c.do(func() error {
		var err error
		if p, err = l.c.dev.alloc(int64(max(bytes, 4))); err != nil {
			return err
		}
		if bytes > 0 {
			return l.c.dev.zero(p, int64(bytes))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: allocating %d bytes on %v: %w", bytes, l.c, err)
	}
	return devMem(p), nil
}

func (l *launcher) FreeAsync(m devtensor.Mem) {
	err := l.c.do(func() error { return l.c.dev.free(m.Ptr()) })
	if !errors.Is(err, ErrClosed) { // closing the context freed everything
		l.sticky(err)
	}
}

func (l *launcher) CopyHtoD(dst devtensor.Mem, off int, src []byte) {
	if len(src) == 0 {
		return
	}
	if k := l.clock.Load(); k != nil {
		defer l.timed(k, "copy host to device")()
	}
	l.sticky(l.c.do(func() error {
		return l.c.dev.htod(dst.Ptr()+uint64(off), unsafe.Pointer(&src[0]), int64(len(src)))
	}))
}

func (l *launcher) CopyDtoH(dst []byte, src devtensor.Mem, off int) error {
	err := l.c.do(func() error {
		if len(dst) == 0 {
			return l.c.dev.sync()
		}
		return l.c.dev.dtoh(unsafe.Pointer(&dst[0]), src.Ptr()+uint64(off), int64(len(dst)))
	})
	return l.first(err)
}

// CopyDtoD copies float32s with scale_f32 by 1 (exact), on the stream.
func (l *launcher) CopyDtoD(dst devtensor.Mem, dstOff int, src devtensor.Mem, srcOff, n int) {
	if n == 0 {
		return
	}
	if k := l.clock.Load(); k != nil {
		defer l.timed(k, "copy device to device")()
	}
	l.sticky(l.c.launch("scale_f32", n/4, dst.Ptr()+uint64(dstOff), src.Ptr()+uint64(srcOff), intArg(n/4), f32Arg(1)))
}

func (l *launcher) Launch(kernel string, grid, block int, args ...uint64) error {
	if k := l.clock.Load(); k != nil {
		defer l.timed(k, kernel)()
	}
	return l.c.do(func() error { return l.c.dev.launch(kernel, uint32(grid), uint32(block), args) })
}

// Sgemm maps the row-major call onto column-major cuBLAS:
// C = op(A)·op(B) is Cᵀ = op(B)ᵀ·op(A)ᵀ.
func (l *launcher) Sgemm(transA, transB bool, m, n, k int, alpha float32, a devtensor.Mem, aOff, lda int,
	b devtensor.Mem, bOff, ldb int, beta float32, c devtensor.Mem, cOff, ldc int) {
	if err := fits32("Sgemm", m, n, k, lda, ldb, ldc); err != nil {
		l.sticky(err)
		return
	}
	if ck := l.clock.Load(); ck != nil {
		defer l.timed(ck, gemmName("sgemm", transA, transB, m, n, k, 1)+aligns(a.Ptr()+uint64(aOff), b.Ptr()+uint64(bOff), c.Ptr()+uint64(cOff)))()
	}
	l.sticky(l.c.do(func() error {
		return l.c.dev.sgemm(transB, transA, n, m, k, alpha, b.Ptr()+uint64(bOff), max(ldb, 1),
			a.Ptr()+uint64(aOff), max(lda, 1), beta, c.Ptr()+uint64(cOff), max(ldc, 1))
	}))
}

// SgemmStridedBatched is Sgemm on batch matrices at element strides sa,
// sb, sc from the first ones (devtensor.BatchedLauncher): one cuBLAS call
// for what would be batch launches, mapped to column-major as Sgemm is.
func (l *launcher) SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a devtensor.Mem, aOff, lda, sa int,
	b devtensor.Mem, bOff, ldb, sb int, beta float32, c devtensor.Mem, cOff, ldc, sc, batch int) bool {
	bd, ok := l.c.dev.(batchedDevice)
	if !ok { // a device without it (the tests' fakes): devtensor loops over Sgemm
		return false
	}
	if err := fits32("SgemmStridedBatched", m, n, k, lda, ldb, ldc, batch); err != nil {
		l.sticky(err)
		return true
	}
	if ck := l.clock.Load(); ck != nil {
		defer l.timed(ck, gemmName("sgemm", transA, transB, m, n, k, batch))()
	}
	l.sticky(l.c.do(func() error {
		return bd.sgemmStridedBatched(transB, transA, n, m, k, alpha, b.Ptr()+uint64(bOff), max(ldb, 1), sb,
			a.Ptr()+uint64(aOff), max(lda, 1), sa, beta, c.Ptr()+uint64(cOff), max(ldc, 1), sc, batch)
	}))
	return true
}

// batchedDevice is a device with cuBLAS's strided-batched GEMM (dlDevice).
type batchedDevice interface {
	sgemmStridedBatched(ta, tb bool, m, n, k int, alpha float32, a uint64, lda, sa int, b uint64, ldb, sb int,
		beta float32, c uint64, ldc, sc, batch int) error
}

func (l *launcher) Synchronize() error { return l.first(l.c.Synchronize()) }

// Close closes the Context (devtensor's Device.Close).
func (l *launcher) Close() error { return l.c.Close() }

// Of returns the Context behind a tensor device from Tensors, so that a
// program that opened "cuda:N" by name (tensor.OpenDevice) can set its
// switches (SetAllowTF32, SetCUDNN, StartOpTimes).
func Of(td tensor.Device) (*Context, bool) {
	dd, ok := devtensor.Of(td)
	if !ok {
		return nil, false
	}
	l, ok := dd.Launcher().(*launcher)
	if !ok {
		return nil, false
	}
	return l.c, true
}

// aligns names the operands' addresses modulo 256 (cuBLAS and cuDNN pick
// their kernels by alignment too).
func aligns(ps ...uint64) string {
	s := " @"
	for i, p := range ps {
		if i > 0 {
			s += "/"
		}
		s += fmt.Sprint(p % 256)
	}
	return s
}

// gemmName names a product for OpTimes: "sgemm NT 512x128x3136", with
// "xB" for a batch of B.
func gemmName(kind string, transA, transB bool, m, n, k, batch int) string {
	t := [2]byte{'N', 'N'}
	if transA {
		t[0] = 'T'
	}
	if transB {
		t[1] = 'T'
	}
	s := fmt.Sprintf("%s %s %dx%dx%d", kind, t[:], m, n, k)
	if batch > 1 {
		s += fmt.Sprintf(" x%d", batch)
	}
	return s
}
