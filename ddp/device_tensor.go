package ddp

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/goddp/goddp/tensor"
)

// TensorDevice adapts any goddp/tensor device to Device, with no queue of
// its own: every operation runs when it is called, in order with the
// device's compute stream (copies to the host wait for it). The all-reduce
// of a bucket therefore runs inside backward, staged through host memory,
// without overlap; the results are those of the CPU. Wrap uses it for a
// model on a device that has no queues (tensor.QueuesOf); goddp/cuda/sim's
// Device.Queues and goddp/cuda's Context.Queues (-tags cuda) are the ones
// with streams and events.
func TensorDevice(d tensor.Device) Device { return &stagedDevice{d: d} }

type stagedDevice struct {
	d   tensor.Device
	mu  sync.Mutex
	err error // first failure of an operation that returns none
}

type stagedMem struct{ t *tensor.Tensor }

func (stagedMem) Free() {} // the collector frees the device memory

func (s *stagedDevice) String() string          { return s.d.String() }
func (s *stagedDevice) Compute() Queue          { return stagedQueue{s} }
func (s *stagedDevice) NewQueue(_ string) Queue { return stagedQueue{s} }

func (s *stagedDevice) Alloc(bytes int) (Mem, error) {
	t, err := tensor.ZerosOn(s.d, tensor.Float32, bytes/4)
	if err != nil {
		return nil, err
	}
	return stagedMem{t}, nil
}

func (s *stagedDevice) fail(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

type stagedQueue struct{ s *stagedDevice }

type doneMarker struct{}

func (doneMarker) Synchronize() {}

// slice is bytes [off, off+n) of m as a float32 tensor view.
func slice(m Mem, off, n int) *tensor.Tensor {
	t := m.(stagedMem).t
	return tensor.Narrow(t, 0, off/4, n/4)
}

func hostF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (q stagedQueue) Record() Marker { return doneMarker{} }
func (q stagedQueue) Wait(Marker)    {}

func (q stagedQueue) Upload(dst Mem, off int, src []byte) {
	q.s.fail(tensor.Copy(slice(dst, off, len(src)), tensor.FromF32(hostF32(src), len(src)/4)))
}

func (q stagedQueue) Download(dst []byte, src Mem, off int) {
	q.s.fail(tensor.Copy(tensor.FromF32(hostF32(dst), len(dst)/4), slice(src, off, len(dst))))
}

func (q stagedQueue) Scale(m Mem, off, n int, s float32) {
	tensor.ScaleInto(slice(m, 4*off, 4*n), float64(s))
}

func (q stagedQueue) Memset0(m Mem, off, n int) { tensor.Fill(slice(m, off, n), 0) }

func (q stagedQueue) Host(name string, f func() error) {
	if err := f(); err != nil {
		q.s.fail(fmt.Errorf("%s: %w", name, err))
	}
}

func (q stagedQueue) Err() error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	return q.s.err
}

func (q stagedQueue) Synchronize() error {
	err := q.s.d.Synchronize()
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	if q.s.err != nil {
		return q.s.err
	}
	return err
}

func (q stagedQueue) CopyFromTensor(dst Mem, off int, src *tensor.Tensor) {
	q.s.fail(tensor.Copy(slice(dst, off, 4*src.Numel()), src))
}

func (q stagedQueue) CopyToTensor(dst *tensor.Tensor, src Mem, off int) {
	q.s.fail(tensor.Copy(dst, slice(src, off, 4*dst.Numel())))
}

func (q stagedQueue) Holds(t *tensor.Tensor) bool { return t.Device() == q.s.d && t.IsContiguous() }

// AllocTensor implements tensor.TensorAllocator (GradientAsBucketView).
func (s *stagedDevice) AllocTensor(n int) (Mem, *tensor.Tensor, error) {
	t, err := tensor.ZerosOn(s.d, tensor.Float32, n)
	if err != nil {
		return nil, nil, err
	}
	return stagedMem{t}, t, nil
}
