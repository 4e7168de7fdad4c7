// Package nccl is goddp's "nccl" comm backend: collectives between GPUs
// through NVIDIA's NCCL, for multi-GPU training.
//
// It is part of the default build. NCCL (libnccl.so.2) and the CUDA driver
// (libcuda.so.1) are opened at run time with dlopen, through cgo and this
// package's own minimal declarations of the few functions it calls, so
// neither NCCL's nor CUDA's headers are needed to compile it, and a binary
// that imports it starts on machines without either. When something is
// missing, New, Probe and comm.Init(Backend "nccl") return an error that
// names each missing piece (ErrNoLibrary, ErrNoDriver, ErrNoDevice).
//
//	comm.Init(ctx, comm.Config{Backend: "nccl"}) // comm registers "nccl"
//	GODDP_BACKEND=nccl ddprun --nproc-per-node gpu ./train
//
// # What has run
//
// Nothing in this package has run on a GPU or against a real NCCL: it was
// written on a machine with neither, where it is compiled, vetted, and its
// error paths are tested (the driver library loads, cuInit reports no
// device, libnccl.so.2 is absent). TestGPUCollectives runs the collectives
// on a one-rank communicator and skips, saying why, where there is no GPU.
//
// # Setup
//
// Each rank uses GPU Options.Device (comm.Init passes the local rank, as
// torch does with cuda:LOCAL_RANK), retains that device's primary context
// and creates one CUDA stream for all of the group's collectives. Rank 0
// asks NCCL for a unique id and publishes it in the rendezvous store under
// Prefix+"nccl/unique_id"; the other ranks read it; all call
// ncclCommInitRank. That call waits for every rank and cannot be
// interrupted: if the timeout passes first, New fails with comm.ErrTimeout
// and leaves it running.
//
// # Buffers
//
// The comm.ProcessGroup methods take comm.Buffers, which are host memory.
// For them the group stages through device scratch and pinned host memory
// from a pool (one allocation per size class, reused): the input is copied
// into pinned memory and enqueued host-to-device, then the collective,
// then device-to-host, all on the group's stream; the result is copied into
// the caller's buffer when the op completes. DDP's host-side buckets
// therefore work unchanged over NCCL.
//
// Device memory is passed as a DeviceBuffer (a CUdeviceptr, a dtype and
// an element count), to the methods of DeviceCollectives: AllReduceDevice,
// BroadcastDevice, AllGatherDevice and ReduceScatterDevice, which enqueue
// NCCL straight on the group's stream. Reach them with AsDevice(pg), which
// looks through comm.Init's wrapper. The group's stream is a blocking
// stream, so kernels launched on the legacy default stream (where
// gorgonia.org/cu launches when given no stream) are ordered before and
// after the collectives without explicit events.
//
// # Completion, errors and timeouts
//
// Ops are enqueued in call order; a watcher goroutine completes their Works
// in that order by polling a CUDA event recorded after each one, and checks
// ncclCommGetAsyncError meanwhile. A failed or overdue op aborts the
// communicator (ncclCommAbort), which ends its pending kernels: that op
// fails with comm.ErrPeerFailed or comm.ErrTimeout, and so does every later
// one. Close waits for the enqueued ops, then destroys the communicator and
// the stream.
//
// Supported: float32, float64, int32, int64, float16 and (NCCL 2.10 or
// later) bfloat16; Sum, Product, Max, Min and (NCCL 2.10 or later) Avg,
// which is NCCL's own ncclAvg. Reduce, Gather, Scatter, AllToAll and
// point-to-point are not offered (comm's package functions return
// comm.ErrUnsupported); Barrier is a one-element all-reduce.
package nccl
