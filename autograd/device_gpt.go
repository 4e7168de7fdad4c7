package autograd

import "github.com/goddp/goddp/tensor"

// backwardDevice is LayerNorm's backward for a forward that ran on a
// device (tensor.LayerNormDevice): it adds dw and db into the Grad buffers
// the engine offers (dst), else into new zeroed tensors, as the CPU
// backward.
func (o *layerNormOp) backwardDevice(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	x, w, b := o.in(0), o.in(1), o.in(2)
	grads := make([]*tensor.Tensor, 3)
	paramGrad := func(i int, p *Variable) *tensor.Tensor {
		if !needs(p) {
			return nil
		}
		if i < len(dst) && dst[i] != nil {
			return dst[i]
		}
		grads[i] = zerosLike(gy, p.Value.Shape()...)
		return grads[i]
	}
	dw, db := paramGrad(1, w), paramGrad(2, b)
	grads[0] = tensor.LayerNormBackwardDevice(gy, o.xhat, o.rstdDev, value(w), dw, db, needs(x))
	return grads
}
