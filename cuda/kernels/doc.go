// Package kernels holds goddp/cuda's device kernels: their CUDA C source
// (kernels.cu) and the PTX that NVRTC generates from it (ptx.go, by
// `go generate`), which goddp/cuda loads with cu.LoadData. It has no cgo
// and imports nothing from CUDA, so it builds everywhere.
//
// None of these kernels has run on a GPU. What has been checked, on a
// machine without one: NVRTC compiles the source, and, with -tags cuda,
// TestPTXAssembles assembles the PTX for sm_70, sm_80 and sm_90 with
// NVIDIA's PTX compiler library (libnvptxcompiler_static, from
// nvidia-cuda-dev), which is what the driver does at load time.
package kernels

//go:generate go run gen_ptx.go

// Names lists the kernels in PTX, as goddp/cuda looks them up.
func Names() []string {
	return []string{"add_bias_f32", "relu_f32", "relu_bwd_f32", "mse_f32", "softmax_ce_f32", "sgd_f32", "fill_f32"}
}
