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
// NCCL is looked for in this order (Candidates): $GODDP_NCCL_LIBRARY when
// set (only it), else libnccl.so.2 through the system loader
// (LD_LIBRARY_PATH, ldconfig: the libnccl2 package), then in the
// nvidia/*/lib directories of the Python environments on the machine
// ($VIRTUAL_ENV, $CONDA_PREFIX, each python3 on $PATH, /usr/local,
// ~/.local), where the nvidia-nccl-cu12 and nvidia-nccl-cu13 wheels that
// PyTorch installs put it. No Python is run to find them.
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
// torch does with cuda:LOCAL_RANK; the ordinal counts the devices that
// CUDA_VISIBLE_DEVICES leaves visible, which the driver applies), retains
// that device's primary context and creates one non-blocking CUDA stream
// for all of the group's collectives. Rank 0
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
// looks through comm.Init's wrapper.
//
// # Streams
//
// The group's stream is non-blocking, so a collective does not serialise
// with unrelated work on the legacy default stream, and nothing orders it
// implicitly. The ordering is explicit, through CUDA events:
//
//   - before: when a device collective is called, an event is recorded on
//     each buffer's DeviceBuffer.Stream (goddp/cuda's queues name the
//     stream of the queue that issues it; 0 is the legacy default stream), and
//     the group's stream waits for it (cuStreamWaitEvent) before the NCCL
//     call. The collective therefore sees everything queued on that stream
//     before the call, such as the backward kernels that wrote the
//     gradients, and the host never blocks for it;
//
//   - after: an event recorded after the collective completes its Work.
//     Wait for the Work before queuing work that reads the result (DDP
//     waits for every bucket before the optimizer step); work queued on
//     the buffer's stream before Wait returns is not ordered after the
//     collective.
//
//   - stream-ordered: AllReduceDeviceOn (StreamCollectives, AsStream)
//     returns only once its wait for the caller's ready event, the
//     ncclAllReduce and the record of the caller's end event are on the
//     group's stream, in order after the ops called before it (torch's
//     ProcessGroupNCCL enqueues on the calling thread and records its end
//     event there). Another stream may wait for end at once, with no host
//     wait: goddp/cuda's queues do, for ddp's stream-ordered buckets, whose
//     watchdog polls end and calls the group's Abort (ncclCommAbort) on a
//     timeout (stream.go; not yet run on a GPU).
//
// Host buffers need neither: they are copied into pinned memory before
// the call returns and copied out when the Work completes.
//
// # Completion, errors and timeouts
//
// A call only queues its op and returns its Work. One issuer goroutine
// makes the NCCL calls, in call order; they can block inside NCCL (its lazy
// connection setup waits for the peers), so each is bounded by the op's
// deadline, and no lock is held meanwhile. A watcher goroutine completes
// the Works in order: it blocks in cuEventSynchronize on a CUDA event
// recorded after each op, so completion follows the stream with no polling
// delay, while a supervisor checks ncclCommGetAsyncError and the deadline
// every few milliseconds. A failed or overdue op, whether
// blocked in the NCCL call or running on the GPU, aborts the communicator
// (ncclCommAbort), which ends its pending kernels and unblocks the call:
// that op fails with comm.ErrPeerFailed or comm.ErrTimeout, and so does
// every later one. Once an abort has begun no call touches the
// communicator again, and the abort waits for the calls in flight (up to
// a second for one blocked inside NCCL, which only the abort ends). Close
// waits for the queued ops, then destroys the communicator and the
// stream. Diagnostics go to Options.Logf, by default stderr on rank 0
// (engine.go; engine_test.go drives it with a fake library).
//
// Supported: float32, float64, int32, int64, float16 and (NCCL 2.10 or
// later) bfloat16; Sum, Product, Max, Min and (NCCL 2.10 or later) Avg,
// which is NCCL's own ncclAvg. Reduce, Gather, Scatter, AllToAll and
// point-to-point are not offered (comm's package functions return
// comm.ErrUnsupported); Barrier is a one-element all-reduce.
package nccl
