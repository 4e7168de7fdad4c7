// Package cuda is goddp's GPU layer: device discovery through NVML in every
// build, and, with the cuda build tag, NVIDIA GPUs as goddp/tensor devices
// ("cuda:N"): a Context per GPU runs the op table of goddp/cuda/devtensor
// (the same table goddp/cuda/sim runs on the host in CI) with goddp's own
// kernels (package kernels), cuBLAS and, for convolutions, cuDNN; its
// Queues carry DDP's buckets on CUDA streams and events to the nccl
// backend.
//
// # What has run on a GPU
//
// The GPU kit (scripts/gpu-kit.sh; docs/gpu.md, "What has run on a GPU",
// has every run) passed on an NVIDIA H100 80GB HBM3 on 2026-11-26 (kits
// 4c9db4b: 18 passed; bf696d7 and 1988558: 22; 3926cb6: 27) and on an
// NVIDIA H200 on 2026-11-27 (4044e3e: 31; 5fb77f5: 32; 5f83731, 35042bc
// and 4a6a532: 40-45 with the batch sweep; 1e7583f: 34 without it), 0
// failed in each. They cover this package's GPU tests
// (gpu_*_cuda_test.go: device tensors against the CPU, convnet ops, bf16,
// cuDNN, TF32, the kernels' machine code, the queues and DDP on them) and
// cuda:0 runs of examples/mlp, examples/cnn and examples/gpt against the
// CPU. comm/nccl's collectives have run at world 1 only, never across two
// or more GPUs. CI has no GPU: there the default build's tests run, the
// cuda build is compiled and vetted and its tests run against fake
// drivers (*_fake_cuda_test.go), and the GPU tests skip saying why.
//
// # One binary for CUDA 11.8 to 13: the libraries are opened at run time
//
// The cuda build links no CUDA library. libcuda.so.1 (the driver API,
// installed with the NVIDIA driver; its name never changes) and cuBLAS are
// opened with dlopen when NewContext or Probe is called, and called
// through function pointers declared in driver_dl.h, as comm/nccl opens
// NCCL. So:
//
//   - a cuda binary starts on any Linux machine, with or without a driver,
//     and only a call that needs a GPU fails, with an error naming what is
//     missing: ErrNoDriver (no libcuda.so.1), ErrNoDevice (cuInit failed,
//     no device, or the ordinal is not visible), ErrNoCUBLAS;
//   - building needs cgo but no CUDA header or library (nvidia-cuda-dev is
//     needed only to regenerate and assemble the PTX, package kernels);
//   - cuBLAS is found at run time: GODDP_CUBLAS_LIBRARY if set (only it),
//     else libcublas.so.13, .12, .11 in that order, each first through the
//     system loader (LD_LIBRARY_PATH, ldconfig) and then in the
//     nvidia/*/lib directories of the Python environments on the machine,
//     where the pip wheels put it (internal/libfind lists the places). A
//     soname newer than the driver supports (cuDriverGetVersion) is
//     skipped: it would load and then fail at its first call;
//   - the kernels ship as PTX ISA 7.8 (NVRTC 11.8, compute_52), which the
//     driver JIT-compiles: any driver for CUDA 11.8 or later (R520+; R525+
//     for the CUDA 12 libraries) loads them. Beside the PTX, machine code
//     for sm_80 and sm_90 (kernels.Cubin, built by the same NVRTC) is
//     loaded on A100- and H100-class devices (compute capability 8.x and
//     9.0), skipping the JIT; Info.Kernels says which was loaded;
//   - convolutions run on cuDNN where it loads (GODDP_CUDNN_LIBRARY if set,
//     else libcudnn.so.9, .so.8 through the system loader, then the Python
//     wheels' nvidia/cudnn/lib): forward, backward data and backward filter,
//     with the algorithm cuDNN's heuristics rank first (v7 queries) and a
//     workspace from the tensors' caching allocator. Without cuDNN, with
//     Context.SetCUDNN(false), or for a shape cuDNN refuses (uneven
//     padding), goddp's own im2col, cuBLAS and col2im run, as on sim.
//     Context.ConvEngine and OnConvEngine say which ran and why;
//   - TF32 is off by default, as torch's allow_tf32: cuBLAS's default
//     math and cuDNN's CUDNN_FMA_MATH keep float32 products float32.
//     Context.SetAllowTF32(true) (the trainer: GODDP_ALLOW_TF32=1) selects
//     CUBLAS_TF32_TENSOR_OP_MATH and cuDNN's default math;
//   - Context.StartOpTimes (the trainer: GODDP_CUDA_OP_TIMES=1) is a
//     per-call profiler: it waits for the stream around each kernel,
//     product, convolution and copy the tensor device queues and sums the
//     times by name and shape.
//
// # Why not gorgonia.org/cu
//
// goddp used gorgonia.org/cu v0.9.6 for this layer until the GPU review.
// It cannot stay in a binary that must start on any machine: its package
// init calls cuInit and os.Exit(1) when that fails (cu.go), so any program
// importing it, a test binary or a trainer started with a CPU device,
// ended with a bare exit 1 before main on a machine without a GPU; it
// links -lcuda, so the binary does not even load without a driver; and
// its blas package links -lcublas, which ties the binary to the one
// cuBLAS soname it was built against (libcublas.so.11 on Debian, absent
// from CUDA 12 and 13 machines). Its cuBLAS wrapper also keeps the first
// error and silently skips every later call. None of that can be fixed
// from outside the package, and importing any part of it runs the init.
// What goddp needs is small, about twenty driver calls and six cuBLAS
// calls, so it declares them itself (driver_dl.h) and gorgonia.org/cu is
// no longer imported. Device pointers are still interchangeable: device
// memory is a CUdeviceptr in the GPU's primary context, which is what
// gorgonia.org/cu, the CUDA runtime and NCCL use.
//
// The default build (no tag) keeps only NVML discovery (go-nvml, which
// fails with an error and never exits): without the tag NewContext and
// the Context's methods return ErrNotCompiled, so code that uses the API
// compiles either way.
//
// # Model
//
// A Context is one GPU's primary context (the one the CUDA runtime, and so
// cuBLAS and NCCL, use, so device pointers can go to the nccl backend)
// with the kernels loaded, a cuBLAS handle, and one non-blocking compute
// stream on which all its work runs in call order. Each C call makes the
// context current on its own thread first, so no goroutine is pinned to a
// thread. Its methods are safe for concurrent use and hold no lock across
// a driver call that waits (a synchronisation, cuMemFree), so a goroutine
// blocked in one never stalls the others; Close waits for the calls in
// flight, and after it they return ErrClosed.
//
// A GPU is chosen by CUDA ordinal: the i-th device CUDA_VISIBLE_DEVICES
// leaves visible (the driver applies the variable). LocalOrdinal returns
// LOCAL_RANK, torch's cuda:LOCAL_RANK, for one GPU per rank.
// tensor.OpenDevice("cuda:N") opens one (this package registers the
// "cuda" kind; without the tag opening it returns ErrNotCompiled).
//
// # As a goddp/tensor device
//
// Context.Tensors is the GPU as a goddp/tensor Device ("cuda:N"): nn.To,
// x.To(dev), autograd's and optim's ops and the examples' -device cuda
// run on it through goddp/cuda/devtensor, over the Context's kernels,
// cuBLAS and copies. Device tensors hold float32 (bfloat16 only inside
// the autocast GEMMs); Int64 tensors (labels, token ids) stay on the host.
// Memory comes from a caching allocator per device, as PyTorch's.
//
// # Streams and the nccl backend
//
// Context.Queues is the GPU as a tensor.QueueDevice, the queues on which
// ddp keeps its buckets: the compute queue is the Context's stream, other
// queues are streams of their own, ordered with CUDA events, and a
// bucket's all-reduce goes to the nccl backend as an nccl.DeviceBuffer
// naming its queue's stream. NCCL runs on its own non-blocking stream:
// before a device collective the backend records an event on the buffer's
// stream and makes its stream wait for it, so the collective sees what was
// queued before the call; after it, Work.Wait returns once the collective
// is done on the GPU, and the queues order the work that reads the result
// after that.
//
// # Ops
//
// The devtensor table a cuda:N device fills (tensor.Kernels' entries; the
// same on sim:N, and doc_test.go fails when this list and the table
// disagree):
//
// Ops: Gemm, GemmStridedBatched, GemmBF16, Fill, Copy, StridedCopy, Axpy,
// Scale, ScaleBy, Add, Sub, Mul, Div, AddBias, Where, ReLU, ReLUBackward,
// Exp, Log, Sqrt, SqrtBackward, Tanh, TanhBackward, Sigmoid,
// SigmoidBackward, GELU, GELUBackward, GELUTanh, GELUTanhBackward,
// GELUTanhWithGrad, SumRows, SumAll, SumSquares,
// ClipCoef, Softmax, SoftmaxBackward, LogSoftmax, LogSoftmaxBackward,
// AttentionSoftmax, AttentionSoftmaxBackward, FlashAttention,
// FlashAttentionBackward, SoftmaxCrossEntropy, MSE,
// SGDMomentum, Adam, SGDMulti, AdamMulti, SumSquaresMulti, ScaleByMulti,
// Im2col, Col2im, Swap01, AddChannelBias, SumChannels,
// MaxPool2d, MaxPool2dBackward, AvgPool2d, AvgPool2dBackward, Dropout,
// IndexSelect, IndexAdd, LayerNorm, LayerNormBackward, BatchNormStats,
// BatchNormFinalize, BatchNormApply, BatchNormBackwardReduce,
// BatchNormBackwardInput, Gather, ScatterAdd, MaxDim, MaxDimBackward,
// CopyBlock, Clamp, ClampBackward, PowScalar, PowScalarBackward,
// PowBackward, BCEWithLogits, BCEWithLogitsBackward.
//
// With cuDNN (cuda:N only; sim and a GPU without cuDNN run Im2col, Gemm
// and Col2im): Conv2dForward (a fused activation runs as its own
// kernel after it), Conv2dBackward.
//
// Kernels index in 64 bits, so tensors of 2^31 elements and more work;
// cuBLAS dimensions are 32-bit, and larger ones return ErrTooLarge. As in
// package tensor, wrong shapes are programmer errors and panic; CUDA and
// cuBLAS failures are returned (a device tensor's op records the first in
// the device, which Synchronize returns), and a cuBLAS failure affects
// only its own call.
package cuda
