// Package kernels holds goddp/cuda's device kernels: their CUDA C source
// (kernels.cu), the PTX that NVRTC generates from it (ptx.go, by
// `go generate`), and, where that NVRTC can build it, machine code for
// sm_80 and sm_90 (cubin/, embedded; Cubin picks the one for a device),
// which goddp/cuda loads with cuModuleLoadData. It has no cgo and imports
// nothing from CUDA, so it builds everywhere.
//
// The kernels examples/mlp uses ran on an H100 (the GPU kit, docs/gpu.md)
// and matched the CPU. What CI checks, on a machine without a GPU: every
// kernel runs on goddp/cuda/sim, which compiles
// kernels.cu as host C++ and tests it against goddp's CPU ops in CI;
// NVRTC compiles the source, and, with -tags cuda,
// TestPTXAssembles assembles the PTX for sm_70, sm_80 and sm_90 with
// NVIDIA's PTX compiler library (libnvptxcompiler_static, from
// nvidia-cuda-dev), which is what the driver does at load time.
package kernels

//go:generate go run gen_ptx.go

// Names lists the kernels in PTX, as goddp/cuda looks them up.
func Names() []string {
	return []string{
		"fill_f32", "scale_f32", "axpy_f32", "scale_by_f32", "add_f32", "sub_f32", "mul_f32", "div_f32", "div_bwd_b_f32", "add_bias_f32",
		"relu_f32", "exp_f32", "log_f32", "sqrt_f32", "tanh_f32", "sigmoid_f32", "relu_bwd_f32", "tanh_bwd_f32", "sigmoid_bwd_f32",
		"sqrt_bwd_f32", "sum_cols_f32", "sum_squares_f32", "sum_f32", "clip_coef_f32", "softmax_f32", "log_softmax_f32",
		"softmax_bwd_f32", "log_softmax_bwd_f32", "mse_f32", "softmax_ce_f32", "sgd_f32", "sgd_momentum_f32", "adam_f32",
		"f32_to_f16", "f16_to_f32", "f32_to_bf16", "bf16_to_f32", "round_bf16_f32",
		// Convolutional networks.
		"im2col_f32", "col2im_f32", "swap01_f32", "add_channel_bias_f32", "sum_channels_part_f32", "max_pool2d_f32",
		"max_pool2d_bwd_f32", "dropout_f32", "avg_pool2d_f32", "avg_pool2d_bwd_f32",
		"strided_copy_f32",
		// Transformer ops (examples/gpt).
		"index_select_f32", "index_add_f32", "layer_norm_f32", "layer_norm_xhat_f32", "layer_norm_bwd_f32", "col_sums_part_f32",
		"col_sums_f32",
		"gelu_f32", "gelu_bwd_f32", "attn_softmax_f32", "attn_softmax_bwd_f32",
		// Batch norm (SyncBatchNorm too), masked_fill and where.
		"bn_stats_f32", "bn_finalize_f32", "bn_apply_f32", "bn_bwd_reduce_f32", "bn_bwd_input_f32", "where_f32",
		// Fused causal attention (FlashAttention-2's algorithm).
		"flash_attn_fwd_f32", "flash_attn_bwd_dot_f32", "flash_attn_bwd_f32", "flash_attn_bwd_dq_f32",
		// Multi-tensor optimizer updates.
		"multi_tensor_adam_f32", "multi_tensor_sgd_momentum_f32", "multi_tensor_sgd_f32", "multi_tensor_sum_squares_f32", "multi_tensor_sum_f32", "multi_tensor_scale_by_f32",
		// Ops along one axis and pointwise gradients.
		"gather_f32", "scatter_add_f32", "max_dim_f32", "max_dim_bwd_f32", "copy_block_f32", "clamp_f32", "clamp_bwd_f32",
		"pow_scalar_f32", "pow_scalar_bwd_f32", "pow_bwd_f32", "bce_logits_f32", "bce_logits_bwd_f32",
		// GELU's tanh approximation (GPT-2's activation).
		"gelu_tanh_f32", "gelu_tanh_with_grad_f32", "gelu_tanh_bwd_f32",
	}
}
