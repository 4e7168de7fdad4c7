package sim

import (
	"fmt"
	"unsafe"

	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/tensor"
)

// Tensors returns the device as a goddp/tensor device ("sim:N"): tensors
// moved to it with To live in its memory, and autograd's and optim's ops on
// them run kernels.cu on its compute stream (goddp/cuda/devtensor), GEMM
// through the CPU engine. Every call returns the same tensor.Device.
func (d *Device) Tensors() tensor.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tensors == nil {
		dt := devtensor.New(launcher{d})
		d.tensors = dt
		// Results that ops allocate without zeroing (tensor.MustEmptyOn)
		// start as NaN here, so that the op tests run on this device show
		// an op that reads what it did not write.
		dt.PoisonEmpty()
	}
	return d.tensors
}

// Close closes the simulated device (devtensor's Device.Close).
func (l launcher) Close() error { return l.d.Close() }

// Of returns the simulated device behind a tensor device from Tensors.
func Of(td tensor.Device) (*Device, bool) {
	dd, ok := devtensor.Of(td)
	if !ok {
		return nil, false
	}
	l, ok := dd.Launcher().(launcher)
	return l.d, ok
}

// BufferOf returns the buffer holding a tensor on a simulated device and the
// byte offset at which the tensor starts in it.
func BufferOf(t *tensor.Tensor) (*Buffer, int, bool) {
	m, off, ok := devtensor.MemOf(t)
	if !ok {
		return nil, 0, false
	}
	b, ok := m.(*Buffer)
	return b, off, ok
}

// launcher is devtensor's view of the device: everything on the compute
// stream.
type launcher struct{ d *Device }

func (l launcher) String() string { return l.d.String() }

// Queues makes the tensor device a tensor.QueueProvider (through
// devtensor): ddp finds the device's queues from its parameters' device.
func (l launcher) Queues() (tensor.QueueDevice, error) { return l.d.Queues(), nil }

func (l launcher) Alloc(bytes int) (devtensor.Mem, error) { return l.d.Alloc(bytes) }

func (l launcher) FreeAsync(m devtensor.Mem) {
	b := m.(*Buffer)
	l.d.compute.Enqueue("free", func() error { b.Free(); return nil })
}

func (l launcher) CopyHtoD(dst devtensor.Mem, off int, src []byte) {
	// A private copy, so the caller may reuse src at once (the staging a
	// CUDA copy from pageable memory does).
	l.d.compute.CopyHtoD(dst.(*Buffer), off, append([]byte(nil), src...))
}

func (l launcher) CopyDtoH(dst []byte, src devtensor.Mem, off int) error {
	l.d.compute.CopyDtoH(dst, src.(*Buffer), off)
	return l.d.compute.Synchronize()
}

func (l launcher) CopyDtoD(dst devtensor.Mem, dstOff int, src devtensor.Mem, srcOff, n int) {
	l.d.compute.CopyDtoD(dst.(*Buffer), dstOff, src.(*Buffer), srcOff, n)
}

func (l launcher) Launch(kernel string, grid, block int, args ...uint64) error {
	return l.d.compute.Launch(kernel, grid, block, args...)
}

func (l launcher) Sgemm(transA, transB bool, m, n, k int, alpha float32, a devtensor.Mem, aOff, lda int,
	b devtensor.Mem, bOff, ldb int, beta float32, c devtensor.Mem, cOff, ldc int) {
	ab, bb, cb := a.(*Buffer), b.(*Buffer), c.(*Buffer)
	l.d.compute.Enqueue("sgemm", func() error {
		for _, x := range []*Buffer{ab, bb, cb} {
			if x.p == nil {
				return fmt.Errorf("sgemm: %w (buffer freed)", ErrClosed)
			}
		}
		tensor.Gemm(transA, transB, m, n, k, alpha, at(ab, aOff), lda, at(bb, bOff), ldb, beta, at(cb, cOff), ldc)
		return nil
	})
}

// SgemmStridedBatched runs the batch products in one enqueued step, as
// cuBLAS's SgemmStridedBatched is one launch (devtensor.BatchedLauncher).
func (l launcher) SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a devtensor.Mem, aOff, lda, sa int,
	b devtensor.Mem, bOff, ldb, sb int, beta float32, c devtensor.Mem, cOff, ldc, sc, batch int) bool {
	ab, bb, cb := a.(*Buffer), b.(*Buffer), c.(*Buffer)
	l.d.compute.Enqueue("sgemm strided batched", func() error {
		for _, x := range []*Buffer{ab, bb, cb} {
			if x.p == nil {
				return fmt.Errorf("sgemm strided batched: %w (buffer freed)", ErrClosed)
			}
		}
		for i := range batch {
			tensor.Gemm(transA, transB, m, n, k, alpha, at(ab, aOff+4*i*sa), lda, at(bb, bOff+4*i*sb), ldb, beta, at(cb, cOff+4*i*sc), ldc)
		}
		return nil
	})
	return true
}

func (l launcher) Synchronize() error { return l.d.compute.Synchronize() }

// at views a buffer's float32s from a byte offset.
func at(b *Buffer, off int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Add(b.p, off)), (b.bytes-off)/4)
}
