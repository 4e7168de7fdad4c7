// Package cuda is goddp's GPU layer: device discovery through NVML, and,
// with the cuda build tag, device tensors, cuBLAS GEMM and the kernels that
// Linear/MLP training with MSE and cross-entropy needs.
//
// # What has run on a GPU
//
// Nothing. This package was written on a machine without a GPU or NVIDIA
// driver. There, the default build's code and tests run (Discover reports
// the missing driver as ErrNoNVML; every CUDA entry point returns
// ErrNotCompiled); the cuda build runs too: NewContext and Probe report
// "no usable CUDA device: cuInit: no CUDA-capable device is detected", and
// the Context's logic (shapes, scratch, 64-bit kernel arguments, closing,
// cuBLAS errors) is tested against a fake device (fake_cuda_test.go). The
// kernels' CUDA C source is compiled to PTX with NVRTC, and that PTX is
// assembled for sm_70, sm_80 and sm_90 with NVIDIA's PTX compiler library
// (package kernels). The GPU tests (gpu_cuda_test.go) compare every op and
// three steps of MLP training with goddp's CPU autograd; they have never
// run. scripts/gpu-kit.sh packs them for a GPU machine (docs/gpu.md).
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
// no longer imported. Device pointers are still interchangeable: a
// Tensor's Ptr is a CUdeviceptr in the device's primary context, which is
// what gorgonia.org/cu, the CUDA runtime and NCCL use, so a program that
// does link gorgonia.org/cu can wrap it as a cu.DevicePtr.
//
// The default build (no tag) keeps only NVML discovery (go-nvml, which
// fails with an error and never exits): without the tag NewContext and
// every method return ErrNotCompiled, so code that uses the API compiles
// either way.
//
// # Model
//
// A Context is one GPU's primary context (the one the CUDA runtime, and so
// cuBLAS and NCCL, use, so device pointers can go to the nccl backend)
// with the kernels loaded from PTX, a cuBLAS handle, and one non-blocking
// compute stream on which all its work runs in call order. Each C call
// makes the context current on its own thread first, so no goroutine is
// pinned to a thread. Methods are safe for concurrent use and hold no lock
// across a driver call that waits (a synchronisation, cuMemFree), so a
// goroutine blocked in one never stalls the others; Close waits for the
// calls in flight, and after it they return ErrClosed (Tensor.Free
// included).
//
// A GPU is chosen by CUDA ordinal: the i-th device CUDA_VISIBLE_DEVICES
// leaves visible (the driver applies the variable). LocalDevice returns
// CUDA(LOCAL_RANK), torch's cuda:LOCAL_RANK, for one GPU per rank.
//
// A Tensor is dense row-major device memory with a shape and a dtype
// (float32 for the ops; float64 can be stored and copied). Context.To is
// torch's x.to(device) between host *tensor.Tensor and device *Tensor;
// ToDevice, ToHost, CopyFromHost and CopyToHost are the explicit forms;
// copies to the host wait for the work queued before them.
//
// # As a goddp/tensor device
//
// Context.Tensors is the GPU as a goddp/tensor Device ("cuda:N"): nn.To,
// x.To(dev), autograd's and optim's training ops, and examples' -device
// cuda run on it through goddp/cuda/devtensor, the same op table that
// goddp/cuda/sim runs in CI, here over the Context's kernels, cuBLAS and
// copies. Only the call sequence is tested here (against the fake device);
// the numbers are tested on sim, and the GPU kit compares a cuda:0 run of
// examples/mlp with the CPU.
//
// # Streams and the nccl backend
//
// Tensor.CommBuffer gives the nccl backend's DeviceBuffer, naming the
// Context's compute stream. NCCL runs on its own non-blocking stream, so
// nothing orders the two implicitly. Before a device collective the
// backend records an event on the compute stream and makes its stream
// wait for it, so the collective sees what the kernels queued before the
// call wrote; the host does not block for this. After it, nothing makes
// the compute stream wait: the collective is issued later, by the
// backend's issuer goroutine, so at the call there is no event yet to
// wait for. Work.Wait returns once the collective is done on the GPU (the
// backend's watcher waits on an event recorded after it), so wait for the
// Work before queueing kernels that read the result (the optimizer step),
// as ddp does (a comm goroutine waits, then orders its queues).
//
// Ops: MatMul (cuBLAS SGEMM, either operand transposed), AddBias,
// SumRows (bias gradients, as a GEMV; zero rows give zeros), ReLU,
// ReLUBackward, MSE and SoftmaxCrossEntropy (loss and gradient in one
// kernel, mean reduction, as torch), SGD and Fill. Device tensors'
// bf16 autocast GEMM (devtensor's GemmBF16) narrows the operands with
// f32_to_bf16 and calls cublasGemmEx (bfloat16 A and B, float32 C,
// CUBLAS_COMPUTE_32F) where cuBLAS is 11.0 or later. Kernels index in 64
// bits, so tensors of 2^31 elements and more work; cuBLAS dimensions are
// 32-bit, and larger ones return ErrTooLarge. As in package tensor, wrong
// shapes or dtypes are programmer errors and panic; CUDA and cuBLAS
// failures are returned, and a cuBLAS failure affects only its own call.
package cuda
