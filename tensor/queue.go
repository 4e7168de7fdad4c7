package tensor

import (
	"errors"
	"fmt"
)

// The stream side of the device contract: what a device with streams
// offers beside Device's synchronous calls. DDP's buckets use it (a bucket
// filled on the compute queue, reduced on a comm queue after an event, as
// c10d does), and it lives here, under every device, so that no device
// package imports ddp and ddp imports no device: goddp/cuda/sim and
// goddp/cuda (-tags cuda) implement it in their own packages, and a
// Device offers it through QueueProvider.

// QueueDevice is a device's queues and the memory they work on.
type QueueDevice interface {
	String() string
	// Compute is the queue the device's tensor ops run on.
	Compute() Queue
	// NewQueue returns a queue concurrent with Compute (a comm stream).
	NewQueue(name string) Queue
	// Alloc returns bytes of zeroed device memory. Where a caching
	// allocator serves the device, the memory may come from its cache;
	// Mem's Free gives it back.
	Alloc(bytes int) (Mem, error)
}

// Queue is an in-order asynchronous device queue (a CUDA stream): every
// method but Synchronize and Err enqueues and returns.
type Queue interface {
	// Record returns an event that completes when the queue has run the
	// work enqueued so far (cuEventRecord).
	Record() Event
	// Wait makes later work on the queue wait for e (cuStreamWaitEvent);
	// e must be an event of the same device (a queue fails on another).
	Wait(e Event)
	// Upload copies src to dst at byte offset off; src must not change
	// until the queue has run the copy.
	Upload(dst Mem, off int, src []byte)
	// Download copies len(dst) bytes of src from byte offset off; the
	// host may read dst once the queue has run the copy.
	Download(dst []byte, src Mem, off int)
	// Scale multiplies n float32s of m from element off by s (a kernel).
	Scale(m Mem, off, n int, s float32)
	// Memset0 zeroes n bytes of m from byte offset off (the fill).
	Memset0(m Mem, off, n int)
	// Host runs f on the queue's timeline (cuLaunchHostFunc): after the
	// work enqueued before it, before the work enqueued after it. f must
	// neither block nor call the device: CUDA may run every host function
	// of the process on one thread, so one that waits for another (or for
	// a collective whose peers wait behind it) hangs. Wait for an Event on
	// a goroutine instead, then enqueue what follows.
	Host(name string, f func() error)
	// Synchronize blocks the host until the queue is idle and returns
	// its first error.
	Synchronize() error
	// Err returns the queue's first error so far, without waiting.
	Err() error
}

// TensorQueue is a Queue that also moves tensors living on its own device
// into and out of device memory, device to device. Both enqueue and
// return.
type TensorQueue interface {
	Queue
	// CopyFromTensor copies src's elements to dst at byte offset off.
	CopyFromTensor(dst Mem, off int, src *Tensor)
	// CopyToTensor copies dst.Numel() float32s of src from byte offset off
	// into dst.
	CopyToTensor(dst *Tensor, src Mem, off int)
	// Holds reports whether t lives on this queue's device.
	Holds(t *Tensor) bool
}

// Event is a point in a queue (a CUDA event).
type Event interface {
	// Synchronize blocks the host until the event completes. It takes no
	// lock another goroutine needs meanwhile.
	Synchronize()
}

// EventQuerier is an optional interface of an Event: whether it has
// completed, without blocking (cuEventQuery). DDP's watchdog polls the
// events of the all-reduces it has queued with it.
type EventQuerier interface {
	Query() bool
}

// Mem is device memory.
type Mem interface{ Free() }

// Caster is an optional interface of a Queue: conversions between float32
// and 16-bit floats on the device (kernels.cu's f32_to_f16, f16_to_f32,
// f32_to_bf16, bf16_to_f32), bit for bit goddp/internal/half.
type Caster interface {
	// Narrow writes n float32s of src as float16 (bfloat16 when bf16)
	// into dst; Widen converts back.
	Narrow(dst, src Mem, n int, bf16 bool)
	Widen(dst, src Mem, n int, bf16 bool)
}

// TensorAllocator is an optional interface of a QueueDevice whose memory
// can also be a tensor on its Device (DDP's GradientAsBucketView).
type TensorAllocator interface {
	// AllocTensor returns n zeroed float32s of device memory as a Mem and
	// as a tensor sharing it. Mem's Free does not free the tensor's
	// memory; the tensor's does.
	AllocTensor(n int) (Mem, *Tensor, error)
}

// QueueProvider is an optional interface of a Device that has queues.
type QueueProvider interface {
	// Queues returns the device's queues (the same value every call), or
	// an error wrapping ErrNoQueues when it has none.
	Queues() (QueueDevice, error)
}

// ErrNoQueues is the error of a device without queues.
var ErrNoQueues = errors.New("tensor: device has no queues")

// QueuesOf returns d's queues; ok is false when d has none (the host, or
// a device that runs every call when it is made).
func QueuesOf(d Device) (q QueueDevice, ok bool, err error) {
	p, isP := d.(QueueProvider)
	if !isP || IsCPU(d) {
		return nil, false, nil
	}
	q, err = p.Queues()
	if errors.Is(err, ErrNoQueues) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("%w: queues of %v: %w", ErrDevice, d, err)
	}
	return q, true, nil
}

// StreamRecorder is an optional interface of a Device whose tensors'
// memory comes from a caching allocator with per-stream free lists: code
// that uses a tensor's memory on a queue other than the compute queue (DDP's
// comm queue on a bucket tensor) records an event there after that use, and
// the block is reused only once the event completes (torch's
// Tensor.record_stream).
type StreamRecorder interface {
	RecordStream(t *Tensor, e Event)
}

// RecordStream tells t's device that t's memory is used on another queue
// until e completes; a device without per-stream caching ignores it.
func RecordStream(t *Tensor, e Event) {
	if r, ok := t.Device().(StreamRecorder); ok {
		r.RecordStream(t, e)
	}
}
