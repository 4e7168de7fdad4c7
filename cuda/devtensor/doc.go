// Package devtensor makes a device that runs goddp/cuda/kernels a
// goddp/tensor device: it fills tensor.Kernels once, with launches of
// kernels.cu and a GEMM, for every such device. A device supplies a Launcher
// (memory, copies, kernel launches and SGEMM on its compute stream);
// goddp/cuda/sim's Device.Tensors is one, and a cuda.Context can be another
// with cuLaunchKernel and cuBLAS.
//
// Memory is freed in stream order: when the garbage collector finds a
// tensor's storage unreachable, its free is queued on the compute stream,
// after every kernel that was queued while the storage was alive, as
// cudaFreeAsync does. So no kernel can run on freed memory, and a training
// step's temporaries are reclaimed without any host wait.
//
// Tests: the arithmetic runs on goddp/cuda/sim (its tests train with this
// table against the CPU, and examples/mlp -device sim against -device cpu
// at world 2); goddp/cuda's fake-device tests check the call sequence a
// training step makes of a Context.
package devtensor
