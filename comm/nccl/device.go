package nccl

import (
	"github.com/goddp/goddp/comm/backend"
)

// DeviceBuffer is a typed view of GPU memory, the device counterpart of
// backend.Buffer: Ptr is a CUDA device pointer (a CUdeviceptr, e.g. from
// cuMemAlloc or gorgonia.org/cu's MemAlloc) on the group's device, holding
// Count elements of DType. Ptr may be 0 only when Count is 0. The memory
// must stay allocated, and must not be written, until the op's Work
// completes.
type DeviceBuffer struct {
	DType backend.DType
	Ptr   uintptr
	Count int
	// Stream is the CUstream that produced the data (0: the legacy
	// default stream). The collective waits, on the GPU, for the work
	// queued on Stream before the call (through a CUDA event). Work queued
	// on Stream after the call is not ordered after the collective, which
	// the group's issuer enqueues later: wait for the op's Work first (it
	// completes when the collective is done on the GPU). goddp/cuda's
	// queues (Context.Queues) set it to the stream of the queue that
	// issues the collective.
	Stream uintptr
}

// Bytes is the buffer's size in bytes.
func (b DeviceBuffer) Bytes() int { return b.Count * b.DType.Size() }

// DeviceCollectives is what the nccl backend offers beyond comm's host
// collectives: the same four collectives on device memory, enqueued on the
// group's own CUDA stream, without host staging. Their layout rules are
// comm's (AllGather's out holds Size() chunks of in.Count, rank-major;
// ReduceScatter's in holds Size() chunks of out.Count).
type DeviceCollectives interface {
	backend.ProcessGroup
	// Device is the CUDA device ordinal the group runs on.
	Device() int
	// Stream is the group's CUstream, a non-blocking one: nothing orders
	// it with other streams except the events each device collective
	// records on its buffers' Stream (see DeviceBuffer.Stream).
	Stream() uintptr
	AllReduceDevice(buf DeviceBuffer, op backend.ReduceOp) backend.Work
	BroadcastDevice(buf DeviceBuffer, root int) backend.Work
	AllGatherDevice(out, in DeviceBuffer) backend.Work
	ReduceScatterDevice(out, in DeviceBuffer, op backend.ReduceOp) backend.Work
}

// AsDevice returns pg's device collectives when pg is (or wraps, as the
// group comm.Init returns does) an nccl group.
func AsDevice(pg backend.ProcessGroup) (DeviceCollectives, bool) {
	return backend.As[DeviceCollectives](pg)
}
