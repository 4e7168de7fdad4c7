// Package cuda is goddp's GPU layer: device discovery through NVML, and,
// with the cuda build tag, device tensors, cuBLAS GEMM and the kernels that
// Linear/MLP training with MSE and cross-entropy needs, on
// gorgonia.org/cu.
//
// # What has run on a GPU
//
// Nothing. This package was written on a machine without a GPU or NVIDIA
// driver. There, the default build's code and tests run (Discover reports
// the missing driver as ErrNoNVML; every CUDA entry point returns
// ErrNotCompiled); the cuda build is compiled and vetted against Debian's
// CUDA 11.8 headers; the kernels' CUDA C source is compiled to PTX with
// NVRTC and that PTX is assembled for sm_70, sm_80 and sm_90 with NVIDIA's
// PTX compiler library (package kernels). The GPU tests (gpu_cuda_test.go)
// compare every op and three steps of MLP training with goddp's CPU
// autograd; they have never been run.
//
// # Two builds
//
// gorgonia.org/cu calls cuInit in its package init and exits the process
// when that fails, so nothing in the default build imports it: Discover
// and DeviceCount use NVML (go-nvml), which fails with an error instead.
// Build with -tags cuda to get the CUDA code (cgo; Debian's nvidia-cuda-dev
// provides the headers and libraries, see scripts/cuda-headers.sh); without
// the tag, NewContext and every method return ErrNotCompiled, so code that
// uses the API compiles either way. A cuda binary needs a GPU to start at
// all: ddprun checks with NVML before starting one (exit code 5), and
// TestGPUSuite runs the cuda tests in a child process only when NVML finds
// a GPU.
//
// # Model
//
// A Context is a GPU's primary context (the one the CUDA runtime and so
// NCCL use, so device pointers can go to the nccl backend) with the
// kernels loaded from PTX (cu.LoadData; the driver compiles it, which
// needs a driver for CUDA 11.8 or later) and a cuBLAS handle. CUDA binds a
// context to an OS thread, so each Context runs every call on its own
// goroutine locked to one thread; methods block until their work is
// queued, and all work goes to the legacy default stream, in order.
//
// A Tensor is dense row-major device memory with a shape and a dtype
// (float32 for the ops; float64 can be stored and copied). Context.To is
// torch's x.to(device) between host *tensor.Tensor and device *Tensor;
// ToDevice, ToHost, CopyFromHost and CopyToHost are the explicit forms.
// Tensor.CommBuffer gives the nccl backend's DeviceBuffer, so gradients
// can be all-reduced where they are.
//
// Ops: MatMul (cuBLAS SGEMM, either operand transposed), AddBias,
// SumRows (bias gradients, as a GEMV), ReLU, ReLUBackward, MSE and
// SoftmaxCrossEntropy (loss and gradient in one kernel, mean reduction, as
// torch), SGD and Fill. As in package tensor, wrong shapes or dtypes are
// programmer errors and panic; CUDA failures are returned.
package cuda
