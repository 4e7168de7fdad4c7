package autograd

import "github.com/goddp/goddp/tensor"

// Ops never ask where their operands live: the tensor ops they call
// dispatch on the operands' device (package tensor runs the CPU code or the
// device's Kernels entry), so each op is written once. An op whose tensor
// ops have no device kernel panics there with tensor.NoKernel ("Conv2d has
// no kernel on sim:0"); operands on different devices panic naming both.

// zerosLike returns zeros of t's dtype, on t's device, of the given shape.
func zerosLike(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	return tensor.ZerosAs(t, shape...)
}
