package tensor

// Device paths of the transformer ops (examples/gpt): autograd's
// LayerNorm, GELU, Softmax and SelfAttention keep their CPU
// code over host slices and call these first. Each dispatches here, as
// every op does: with its operands on the host it returns ok false (or nil)
// and the caller runs its CPU code; on a device it runs the device's
// Kernels entries on contiguous operands and returns device tensors (an
// entry the device lacks panics with NoKernel).

// contiguousOrNil is t.Contiguous(), nil for nil.
func contiguousOrNil(t *Tensor) *Tensor {
	if t == nil {
		return nil
	}
	return t.Contiguous()
}
