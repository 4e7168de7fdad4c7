package autograd

import "github.com/goddp/goddp/tensor"

// backwardDevice is LayerNorm's backward for a forward that ran on a
// device (tensor.LayerNormDevice): it adds dw and db into the Grad buffers
// the engine offers (dst), else into new zeroed tensors, as the CPU
// backward.
func (o *layerNormOp) backwardDevice(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	x, w, b := o.in(0), o.in(1), o.in(2)
	grads, dw, db := affineGrads(gy, dst, w, b)
	grads[0] = tensor.LayerNormBackwardDevice(gy, o.xhat, o.rstdDev, value(w), dw, db, needs(x))
	return grads
}

// affineGrads returns the gradient slice of a normalization op on a device
// (x, w, b) and the buffers its weight and bias gradients add into: the
// Grad buffers the engine offers (dst), else new zeroed tensors (set in
// grads), nil for a parameter that needs none.
func affineGrads(gy *tensor.Tensor, dst []*tensor.Tensor, w, b *Variable) (grads []*tensor.Tensor, dw, db *tensor.Tensor) {
	grads = make([]*tensor.Tensor, 3)
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
	return grads, paramGrad(1, w), paramGrad(2, b)
}
