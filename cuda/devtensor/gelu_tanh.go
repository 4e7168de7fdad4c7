package devtensor

import "github.com/goddp/goddp/tensor"

// The entries of GELU's tanh approximation (tensor.Kernels' GELUTanh,
// GELUTanhBackward and GELUTanhWithGrad; tensor/gelu_tanh.go), each one
// launch of its kernel in kernels.cu ("GELU's tanh approximation").
// GELUTanhWithGrad writes the derivative with the value, so that
// autograd keeps it (the input's size, as keeping the input would be) and
// the backward is one product.
func (d *Device) geluTanhKernels(k *tensor.Kernels) {
	k.GELUTanh = func(y, x *tensor.Tensor) {
		const op = "gelu tanh"
		n := same(op, y, x)
		d.launch("gelu_tanh_f32", grid(n), d.ptr(op, y), d.ptr(op, x), i64(n))
	}
	k.GELUTanhWithGrad = func(y, dv, x *tensor.Tensor) {
		const op = "gelu tanh with grad"
		n := same(op, y, dv, x)
		d.launch("gelu_tanh_with_grad_f32", grid(n), d.ptr(op, y), d.ptr(op, dv), d.ptr(op, x), i64(n))
	}
	k.GELUTanhBackward = func(dx, dy, x *tensor.Tensor) {
		const op = "gelu tanh backward"
		n := same(op, dx, dy, x)
		d.launch("gelu_tanh_bwd_f32", grid(n), d.ptr(op, dx), d.ptr(op, dy), d.ptr(op, x), i64(n))
	}
}
