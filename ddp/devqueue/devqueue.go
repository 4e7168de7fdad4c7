package devqueue

import (
	comm "goddp/comm/backend"
	"goddp/tensor"
)

// Device is a GPU, or goddp/cuda/sim, that holds the reducer's buckets.
type Device interface {
	String() string
	// Compute is the queue the model's kernels run on.
	Compute() Queue
	// NewQueue returns a queue concurrent with Compute (the comm stream).
	NewQueue(name string) Queue
	// Alloc returns bytes of zeroed device memory.
	Alloc(bytes int) (Mem, error)
}

// Queue is an in-order asynchronous device queue (a CUDA stream): every
// method but Synchronize enqueues and returns.
type Queue interface {
	// Record returns a marker that completes when the queue has run the
	// work enqueued so far (cuEventRecord).
	Record() Marker
	// Wait makes later work on the queue wait for m (cuStreamWaitEvent);
	// m must be a marker of the same device (a queue fails on another).
	Wait(m Marker)
	// Upload copies src to dst at byte offset off; src must not change
	// until the queue has run the copy.
	Upload(dst Mem, off int, src []byte)
	// Download copies len(dst) bytes of src from byte offset off; the
	// host may read dst once the queue has run the copy.
	Download(dst []byte, src Mem, off int)
	// Scale multiplies n float32s of m from element off by s (a kernel).
	Scale(m Mem, off, n int, s float32)
	// Memset0 zeroes n bytes of m from byte offset off.
	Memset0(m Mem, off, n int)
	// Host runs f on the queue's timeline (cuLaunchHostFunc): after the
	// work enqueued before it, before the work enqueued after it. f must
	// neither block nor call the device: CUDA may run every host function
	// of the process on one thread, so one that waits for another (or for
	// a collective whose peers wait behind it) hangs. Wait for a Marker on
	// a goroutine instead, then enqueue what follows.
	Host(name string, f func() error)
	// Synchronize blocks the host until the queue is idle and returns
	// its first error.
	Synchronize() error
	// Err returns the queue's first error so far, without waiting.
	Err() error
}

// TensorQueue is a Queue that also moves tensors living on its own device
// (goddp/tensor device tensors) into and out of device memory, device to
// device: what OnDevice needs when the model's parameters, and so its
// gradients, are on the device. Both enqueue and return.
type TensorQueue interface {
	Queue
	// CopyFromTensor copies src's elements to dst at byte offset off.
	CopyFromTensor(dst Mem, off int, src *tensor.Tensor)
	// CopyToTensor copies dst.Numel() float32s of src from byte offset off
	// into dst.
	CopyToTensor(dst *tensor.Tensor, src Mem, off int)
	// Holds reports whether t lives on this queue's device.
	Holds(t *tensor.Tensor) bool
}

// Marker is a point in a queue (a CUDA event).
type Marker interface {
	// Synchronize blocks the host until the marker completes.
	Synchronize()
}

// Mem is device memory.
type Mem interface{ Free() }

// Reducer is an optional interface of a Device whose memory a process
// group can all-reduce in place on the device, on a queue of the group's
// own (NCCL's stream), without staging through host memory.
type Reducer interface {
	// AllReduceAfter enqueues an all-reduce of n elements of dtype
	// (Float32, or Float16/BFloat16 for compression hooks) of m (from byte
	// 0, in place) across pg, ordered on the device after the work enqueued
	// on q so far: the group's queue waits for it, the host does not. w
	// completes when the all-reduce has, on the device too, so work a
	// queue is given after w completes sees the result. ok is false, and
	// nothing is enqueued, when pg cannot reduce this device's memory: the
	// caller stages through host memory then.
	AllReduceAfter(pg comm.ProcessGroup, q Queue, m Mem, n int, dtype comm.DType, op comm.ReduceOp) (w comm.Work, ok bool)
}

// Caster is an optional interface of a Queue: conversions between float32
// and 16-bit floats on the device (kernels.cu's f32_to_f16, f16_to_f32,
// f32_to_bf16, bf16_to_f32), bit for bit goddp/internal/half, so that
// DDP's fp16/bf16 compression hooks reduce device memory (with a Reducer)
// exactly as they reduce host memory.
type Caster interface {
	// Narrow writes n float32s of src as float16 (bfloat16 when bf16)
	// into dst; Widen converts back.
	Narrow(dst, src Mem, n int, bf16 bool)
	Widen(dst, src Mem, n int, bf16 bool)
}

// Provider is implemented by a goddp/cuda/devtensor launcher (the cuda
// Context's) that has a Device with real queues: ddp.Wrap asks a model's
// tensor device for it before falling back to host-staged copies.
type Provider interface {
	QueueDevice() (Device, error)
}

// TensorAllocator is an optional interface of a Device whose memory can
// also be a goddp/tensor tensor on the device: DDP's buckets are then
// allocated as tensors, and with GradientAsBucketView each parameter's
// gradient is a view of its bucket, as torch's is.
type TensorAllocator interface {
	// AllocTensor returns n zeroed float32s of device memory as a Mem and
	// as a tensor sharing it. Mem's Free does not free the tensor's
	// memory; the tensor's collection does.
	AllocTensor(n int) (Mem, *tensor.Tensor, error)
}
