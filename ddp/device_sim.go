//go:build cgo

package ddp

import (
	"goddp/cuda/sim"
	"goddp/tensor"
)

// SimDevice adapts a goddp/cuda/sim device to Device, for OnDevice.
func SimDevice(d *sim.Device) Device { return simDevice{d} }

type simDevice struct{ d *sim.Device }

type simQueue struct {
	d *sim.Device
	s *sim.Stream
}

type simMem struct{ b *sim.Buffer }

func (m simMem) Free() { m.b.Free() }

func (s simDevice) String() string             { return s.d.String() }
func (s simDevice) Compute() Queue             { return simQueue{s.d, s.d.Compute()} }
func (s simDevice) NewQueue(name string) Queue { return simQueue{s.d, s.d.NewStream(name)} }
func (s simDevice) Alloc(bytes int) (Mem, error) {
	b, err := s.d.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	return simMem{b}, nil
}

func (q simQueue) Record() Marker {
	e := q.d.NewEvent()
	e.Record(q.s)
	return e
}

func (q simQueue) Wait(m Marker)                         { q.s.WaitEvent(m.(*sim.Event)) }
func (q simQueue) Upload(dst Mem, off int, src []byte)   { q.s.CopyHtoD(dst.(simMem).b, off, src) }
func (q simQueue) Download(dst []byte, src Mem, off int) { q.s.CopyDtoH(dst, src.(simMem).b, off) }
func (q simQueue) Memset0(m Mem, off, n int)             { q.s.Memset0(m.(simMem).b, off, n) }
func (q simQueue) Host(name string, f func() error)      { q.s.Enqueue(name, f) }
func (q simQueue) Synchronize() error                    { return q.s.Synchronize() }

// Scale runs kernels.cu's scale_f32 in place, as the GPU does.
func (q simQueue) Scale(m Mem, off, n int, s float32) {
	b := m.(simMem).b
	p := sim.PtrAt(b, 4*off)
	_ = q.s.Launch("scale_f32", max(1, min((n+255)/256, 1<<20)), 256, p, p, sim.I64(n), sim.F32(s))
}

// CopyFromTensor implements TensorQueue: a device-to-device copy from a
// tensor on this simulated device.
func (q simQueue) CopyFromTensor(dst Mem, off int, src *tensor.Tensor) {
	b, soff, _ := sim.BufferOf(src)
	q.s.CopyDtoD(dst.(simMem).b, off, b, soff, 4*src.Numel())
}

// CopyToTensor implements TensorQueue.
func (q simQueue) CopyToTensor(dst *tensor.Tensor, src Mem, off int) {
	b, doff, _ := sim.BufferOf(dst)
	q.s.CopyDtoD(b, doff, src.(simMem).b, off, 4*dst.Numel())
}

// Holds implements TensorQueue.
func (q simQueue) Holds(t *tensor.Tensor) bool {
	b, _, ok := sim.BufferOf(t)
	return ok && b.Device() == q.d && t.IsContiguous()
}

// deviceFor returns the Device adapter of a goddp/tensor device, for Wrap
// on a model whose parameters live there.
func deviceFor(td tensor.Device) (Device, error) {
	if d, ok := sim.Of(td); ok {
		return SimDevice(d), nil
	}
	return TensorDevice(td), nil
}
