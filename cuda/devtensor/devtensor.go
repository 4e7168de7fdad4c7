package devtensor

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"goddp/tensor"
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

// Device is a tensor.Device over a Launcher. Use one Device per device:
// tensors are on the same device when their Device is the same value.
type Device struct {
	l Launcher
	k tensor.Kernels
}

// New returns the tensor device of l.
func New(l Launcher) *Device {
	d := &Device{l: l}
	d.k = d.kernels()
	return d
}

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

// storage is a tensor's device memory; its free is queued when it is
// collected.
type storage struct {
	dev *Device
	mem Mem
	n   int // float32 elements
}

func (s *storage) Device() tensor.Device { return s.dev }

// Alloc implements tensor.Device.
func (d *Device) Alloc(n int) (tensor.Storage, error) {
	m, err := d.l.Alloc(4 * n)
	if err != nil {
		return nil, err
	}
	s := &storage{dev: d, mem: m, n: n}
	l := d.l
	runtime.AddCleanup(s, func(m Mem) { l.FreeAsync(m) }, m)
	return s, nil
}

func (d *Device) own(s tensor.Storage) (*storage, error) {
	st, ok := s.(*storage)
	if !ok || st.dev != d {
		return nil, fmt.Errorf("devtensor: storage of %v used on %v", s.Device(), d)
	}
	return st, nil
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

func int32Bytes(x []int32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
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
	st, ok := s.(*storage)
	if !ok || st.dev != d {
		panic(fmt.Sprintf("devtensor: %s: operand on %v, not %v", op, t.Device(), d))
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
