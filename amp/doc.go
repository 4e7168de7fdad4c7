// Package amp is goddp's mixed-precision training support, after torch.amp:
// Autocast, which runs the matrix products of a model's layers in bfloat16,
// and a GradScaler for float16 training with dynamic loss scaling.
//
// # Autocast
//
// Autocast(model, BFloat16) lowers the layers on torch's autocast list
// (linear, conv2d and attention's products today; see Autocast for the list and what stays float32) to
// bfloat16 products with float32 accumulation, through oneDNN's bf16
// matmul (tensor.GemmBF16). On a CPU with AVX512-BF16 those run at up to
// twice float32's rate; elsewhere the values are the same at float32 speed
// (tensor.BF16Native says which). On a device the products go through
// its tensor.Kernels.GemmBF16, the operands narrowed to bfloat16 on the
// device: cuBLAS's bf16 GEMM (cublasGemmEx, float32 compute) on a GPU, and
// on goddp/cuda/sim the rounded operands through the float32 GEMM, which
// gives the same numbers. Parameters, gradients and optimizer
// state stay float32, so DDP's buckets, the all-reduce and checkpoints are
// exactly as without autocast. bfloat16 has float32's exponent range, so it
// needs no loss scaling.
//
// # GradScaler
//
// float16 has 5 exponent bits: gradients below about 6e-8 flush to zero.
// GradScaler multiplies the loss by a large scale (2^16 at first) before
// backward, so gradients are computed scaled, and divides them again before
// the optimizer step. When a scaled gradient overflows to inf or NaN the step
// is skipped and the scale halved; after 2000 clean steps in a row it is
// doubled. The rule and its float32 arithmetic are torch's, checked against
// fixtures from scripts/gen_fixtures_gradscaler.py over 3000 steps with
// overflows injected.
//
// Under DDP the gradients are all-reduced before Step, so an overflow on one
// rank reaches every rank's gradients anyway; WithGroup all-reduces the
// overflow flag too, so that every rank skips the same steps even for
// gradients that are not all-reduced. The scaler's State goes into the
// checkpoint beside the optimizer's, so a resumed run continues with the
// scale it had.
//
// The parameters and their gradients stay float32 ("master weights"); DDP
// and the optimizers are unchanged.
package amp
