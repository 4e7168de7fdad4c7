package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// LayerNorm normalizes x over its trailing dimensions to zero mean and unit
// (biased) variance, then applies the elementwise affine w and b, as
// torch.nn.functional.layer_norm. The normalized shape is w's shape (or b's);
// when both are nil it is x's last dimension. Backward accumulates dw and db
// straight into existing Grad buffers.
func LayerNorm(x, w, b *Variable, eps float64) *Variable {
	xs := x.Value.Shape()
	var norm []int
	switch {
	case w != nil:
		norm = w.Value.Shape()
	case b != nil:
		norm = b.Value.Shape()
	case len(xs) > 0:
		norm = xs[len(xs)-1:]
	}
	if len(norm) == 0 || len(norm) > len(xs) || !slices.Equal(norm, xs[len(xs)-len(norm):]) {
		panic(fmt.Sprintf("autograd: LayerNorm: input shape %v does not end with normalized shape %v", xs, norm))
	}
	if w != nil && b != nil && !slices.Equal(w.Value.Shape(), b.Value.Shape()) {
		panic(fmt.Sprintf("autograd: LayerNorm: weight shape %v does not match bias shape %v", w.Value.Shape(), b.Value.Shape()))
	}
	d := 1
	for _, v := range norm {
		d *= v
	}
	// The op keeps x and each row's mean and rstd, as torch's layer_norm
	// does, and its backward recomputes xhat from them (to the same bits):
	// keeping xhat cost an activation-sized tensor per LayerNorm until the
	// backward, and a third of the forward's memory traffic.
	xc := x.Value.Contiguous()
	y, mean, rstd := tensor.LayerNorm(xc, value(w), value(b), d, eps)
	return FromOp(y, &layerNormOp{inputs: ins(x, w, b), xc: xc, mean: mean, rstd: rstd})
}

type layerNormOp struct {
	inputs                        // x, w (may be nil), b (may be nil)
	xc, mean, rstd *tensor.Tensor // x, contiguous; each row's mean and rstd [rows]
}

func (o *layerNormOp) Name() string { return "LayerNorm" }
func (o *layerNormOp) freshGrads()  {}

// savedTensors: what the op kept for backward goes back to the cache with
// the graph (FreeGraph): the statistics, and x's contiguous copy when x was
// not contiguous (FreeGraph keeps x's own storage when the caller holds x).
func (o *layerNormOp) savedTensors() []*tensor.Tensor {
	return []*tensor.Tensor{o.mean, o.rstd, o.xc}
}

func (o *layerNormOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

// backwardInto adds dw and db into the Grad buffers the engine offers
// (dst), else into new zeroed tensors.
func (o *layerNormOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	x, w, b := o.in(0), o.in(1), o.in(2)
	grads, dw, db := affineGrads(gy, dst, w, b)
	grads[0] = tensor.LayerNormBackward(gy, o.xc, o.mean, o.rstd, value(w), dw, db, needs(x))
	return grads
}

// affineGrads returns the gradient slice of a normalization op (x, w, b)
// and the buffers its weight and bias gradients add into: the Grad buffers
// the engine offers (dst), else new zeroed tensors (set in grads), nil for
// a parameter that needs none.
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
