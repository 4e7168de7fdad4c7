package sim

import (
	"fmt"

	comm "github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// Queues returns the device's queues, goddp/tensor's stream contract
// (tensor.QueueDevice): the compute queue is Compute, NewQueue makes a
// stream, events are Events. ddp.Wrap finds them through the device's
// tensor device (tensor.QueuesOf(d.Tensors())); ddp.OnDevice takes them
// for a model that stays on the host. Its AllReduceAfter lets a
// Collectives on this device reduce the memory in place.
func (d *Device) Queues() tensor.QueueDevice { return simDevice{d} }

type simDevice struct{ d *Device }

type simQueue struct {
	d *Device
	s *Stream
}

// simMem is a bucket's memory; view: it belongs to a tensor (AllocTensor),
// whose collection frees it.
type simMem struct {
	b    *Buffer
	view bool
}

func (m simMem) Free() {
	if !m.view {
		m.b.Free()
	}
}

func (s simDevice) String() string                    { return s.d.String() }
func (s simDevice) Compute() tensor.Queue             { return simQueue{s.d, s.d.Compute()} }
func (s simDevice) NewQueue(name string) tensor.Queue { return simQueue{s.d, s.d.NewStream(name)} }
func (s simDevice) Alloc(bytes int) (tensor.Mem, error) {
	b, err := s.d.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	return simMem{b: b}, nil
}

// AllocTensor implements tensor.TensorAllocator: the bucket is a tensor on
// the device's goddp/tensor device, for GradientAsBucketView.
func (s simDevice) AllocTensor(n int) (tensor.Mem, *tensor.Tensor, error) {
	t, err := tensor.ZerosOn(s.d.Tensors(), tensor.Float32, n)
	if err != nil {
		return nil, nil, err
	}
	b, off, ok := BufferOf(t)
	if !ok || off != 0 {
		return nil, nil, fmt.Errorf("sim: a new tensor on %v is not a whole buffer", s.d)
	}
	return simMem{b: b, view: true}, t, nil
}

// AllReduceAfter implements ddp.DeviceReducer for a group that is (or
// wraps) a Collectives on this device: the stand-in for NCCL on a GPU.
func (s simDevice) AllReduceAfter(pg comm.ProcessGroup, q tensor.Queue, m tensor.Mem, n int, dtype comm.DType, op comm.ReduceOp) (comm.Work, bool) {
	c, ok := AsCollectives(pg)
	if !ok || c.Device() != s.d {
		return nil, false
	}
	sq := q.(simQueue)
	after := s.d.NewEvent()
	after.Record(sq.s)
	w, _ := c.AllReduceDevice(m.(simMem).b, 0, n, dtype, op, after)
	return w, true
}

// AllReduceOn implements ddp.StreamReducer: the all-reduce is on the
// group's stream when it returns (the stand-in issues in call order, as
// NCCL's enqueue does), and done, an Event recorded right after it there,
// is one that another queue may Wait for at once (cuStreamWaitEvent) and
// that a watchdog may Query.
func (s simDevice) AllReduceOn(pg comm.ProcessGroup, q tensor.Queue, m tensor.Mem, n int, dtype comm.DType, op comm.ReduceOp) (comm.Work, tensor.Event, bool) {
	c, ok := AsCollectives(pg)
	if !ok || c.Device() != s.d {
		return nil, nil, false
	}
	after := s.d.NewEvent()
	after.Record(q.(simQueue).s)
	w, done := c.AllReduceDevice(m.(simMem).b, 0, n, dtype, op, after)
	return w, done, true
}

func (q simQueue) Record() tensor.Event {
	e := q.d.NewEvent()
	e.Record(q.s)
	return e
}

// Wait waits for an event of the device on the GPU's terms; any other
// event fails the queue (a host function must not block).
func (q simQueue) Wait(m tensor.Event) {
	if e, ok := m.(*Event); ok {
		q.s.WaitEvent(e)
		return
	}
	q.s.Enqueue("wait marker", func() error { return fmt.Errorf("sim: %v cannot wait for a %T on the device", q.d, m) })
}

func (q simQueue) Err() error { return q.s.Err() }

func (q simQueue) Upload(dst tensor.Mem, off int, src []byte) { q.s.CopyHtoD(dst.(simMem).b, off, src) }
func (q simQueue) Download(dst []byte, src tensor.Mem, off int) {
	q.s.CopyDtoH(dst, src.(simMem).b, off)
}
func (q simQueue) Memset0(m tensor.Mem, off, n int) { q.s.Memset0(m.(simMem).b, off, n) }
func (q simQueue) Host(name string, f func() error) { q.s.Enqueue(name, f) }
func (q simQueue) Synchronize() error               { return q.s.Synchronize() }

// Scale runs kernels.cu's scale_f32 in place, as the GPU does.
func (q simQueue) Scale(m tensor.Mem, off, n int, s float32) {
	b := m.(simMem).b
	p := PtrAt(b, 4*off)
	_ = q.s.Launch("scale_f32", max(1, min((n+255)/256, 1<<20)), 256, p, p, I64(n), F32(s))
}

// Narrow implements tensor.Caster with kernels.cu's f32_to_f16 and
// f32_to_bf16.
func (q simQueue) Narrow(dst, src tensor.Mem, n int, bf16 bool) {
	k := "f32_to_f16"
	if bf16 {
		k = "f32_to_bf16"
	}
	_ = q.s.Launch(k, max(1, min((n+255)/256, 1<<20)), 256, dst.(simMem).b.Ptr(), src.(simMem).b.Ptr(), I64(n))
}

// Widen implements tensor.Caster.
func (q simQueue) Widen(dst, src tensor.Mem, n int, bf16 bool) {
	k := "f16_to_f32"
	if bf16 {
		k = "bf16_to_f32"
	}
	_ = q.s.Launch(k, max(1, min((n+255)/256, 1<<20)), 256, dst.(simMem).b.Ptr(), src.(simMem).b.Ptr(), I64(n))
}

// CopyFromTensor implements tensor.TensorQueue: a device-to-device copy from a
// tensor on this simulated device.
func (q simQueue) CopyFromTensor(dst tensor.Mem, off int, src *tensor.Tensor) {
	b, soff, _ := BufferOf(src)
	q.s.CopyDtoD(dst.(simMem).b, off, b, soff, 4*src.Numel())
}

// CopyToTensor implements tensor.TensorQueue.
func (q simQueue) CopyToTensor(dst *tensor.Tensor, src tensor.Mem, off int) {
	b, doff, _ := BufferOf(dst)
	q.s.CopyDtoD(b, doff, src.(simMem).b, off, 4*dst.Numel())
}

// Holds implements tensor.TensorQueue.
func (q simQueue) Holds(t *tensor.Tensor) bool {
	b, _, ok := BufferOf(t)
	return ok && b.Device() == q.d && t.IsContiguous()
}
