package autograd

import "github.com/goddp/goddp/tensor"

// Device paths of the transformer ops whose CPU code is written over host
// slices (LayerNorm, Softmax, SelfAttention): each op branches here in one
// line when its input lives on a device, and the work runs through
// tensor's device functions (tensor/device_gpt.go). IndexSelect and GELU
// call those functions directly.

func layerNormDevice(x, w, b *Variable, d int, eps float64) *Variable {
	y, xhat, rstd := tensor.LayerNormDevice(x.Value, value(w), value(b), d, eps)
	return FromOp(y, &layerNormOp{inputs: ins(x, w, b), d: d, rows: rstd.Numel(), xhat: xhat, rstdDev: rstd})
}

// backwardDevice adds dw and db into the Grad buffers the engine offers
// (dst), else into new zeroed tensors, as the CPU backward.
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

// softmaxDevice runs Softmax over the last dimension; other axes have no
// kernel (a transpose would need one).
func softmaxDevice(a *Variable, x *tensor.Tensor, outer, n, inner int) *Variable {
	if inner != 1 {
		panic(tensor.NoKernel("Softmax over a dimension other than the last", x.Device()))
	}
	y := tensor.SoftmaxDevice(x)
	return FromOp(y, &softmaxOp{inputs: ins(a), y: y, outer: outer, n: n, inner: inner})
}

// selfAttentionDevice runs SelfAttention through per-head GEMMs on the
// packed qkv (tensor.SelfAttentionDevice). An explicit mask has no device
// path yet; the causal mask is built into the softmax kernel.
func selfAttentionDevice(qkv *Variable, heads int, pl *attnPlan, o AttentionOptions) *Variable {
	if o.Mask != nil {
		panic(tensor.NoKernel("SelfAttention with an explicit Mask", qkv.Value.Device()))
	}
	x := qkv.Value.Contiguous()
	y, p := tensor.SelfAttentionDevice(x, heads, pl.causal, pl.scale)
	return FromOp(y, &selfAttentionOp{inputs: ins(qkv), plan: pl, x: x, p: p, heads: heads})
}
