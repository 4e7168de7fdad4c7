// Package sim is goddp's simulated GPU: a device whose memory is host RAM
// and whose streams, events and kernels behave as CUDA's, so that the
// whole device path (kernels' indexing and arithmetic, the ordering of
// compute and communication streams, DDP's buckets on a device) runs in CI
// and on a laptop. Only the GPU's own scheduling stays untested.
//
// # Streams and events
//
// A Stream is a real asynchronous queue: each call enqueues work and
// returns, and a goroutine per stream runs it in order. Streams run
// concurrently; Event orders them as CUDA events do: Record captures the
// work enqueued on a stream so far, Stream.WaitEvent makes later work on
// another stream wait for it, Event.Synchronize and Stream.Synchronize
// block the host. Stream.SetDelay slows every later operation of a stream
// and Stream.Sleep enqueues busy time, so a missing wait shows up as stale
// data in a test, and overlap can be measured against simulated compute.
//
// # Kernels
//
// The kernels are goddp/cuda/kernels' kernels.cu itself, compiled as host
// C++ with cudahost.h, which supplies threadIdx, blockIdx, blockDim,
// gridDim, __shared__, __syncthreads and atomics. A launch runs each block
// on one host thread (blocks in parallel across GOMAXPROCS threads); a
// kernel with __syncthreads runs its block's threads as fibers switched at
// each barrier, so every thread finishes a barrier phase before any
// starts the next, for any block size. gen_kernels.go derives the argument
// unpacking and the barrier flag from the source (go generate), so a
// kernel added to kernels.cu runs here with no other change. Arguments are
// 8 bytes each, as goddp/cuda passes them to cuLaunchKernel: device
// pointers (Ptr), 64-bit counts (I64) and float32 bits (F32).
//
// GEMM (Stream.Sgemm) runs goddp's CPU engine in place of cuBLAS.
//
// # As a tensor device
//
// Device.Tensors is the device as a goddp/tensor Device ("sim:N"):
// x.To(dev.Tensors()) puts a tensor in its memory, and autograd's and
// optim's ops on it run kernels.cu on the compute stream through
// goddp/cuda/devtensor, so a model trains on sim as it would on a GPU
// (nn.To moves a model; ddp.Wrap then keeps its buckets on the device;
// examples take -device sim). A tensor's memory is freed in stream order
// once the garbage collector finds it unreachable.
//
// # As NCCL
//
// NewCollectives wraps a process group so that it all-reduces device
// memory on a stream of its own, after an event and with a completion
// event, as the nccl backend does on a GPU. ddp.Wrap with such a group and
// a model on sim hands its buckets to it in device memory instead of
// staging them through the host, so the event ordering of that path is
// tested without a GPU. The data moves through the wrapped group.
package sim
