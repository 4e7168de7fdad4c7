package optim

import (
	"math"

	"goddp/autograd"
	"goddp/tensor"
)

// ClipGradNorm rescales the gradients of params in place so that their
// global L2 norm is at most maxNorm, and returns the norm they had before
// (torch.nn.utils.clip_grad_norm_ with norm_type 2). As in torch, every
// gradient is multiplied by min(1, maxNorm/(norm+1e-6)); parameters without a
// gradient are ignored. The norm is accumulated in float64. A non-finite norm
// is returned as is and, as in torch 1.13 (error_if_nonfinite=False), scales
// the gradients by NaN; check the result when that matters.
func ClipGradNorm(params []*autograd.Variable, maxNorm float64) float64 {
	var sumSq float64
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		if p.Grad.DType() == tensor.Float64 {
			for _, x := range p.Grad.Contiguous().F64() {
				sumSq += x * x
			}
			continue
		}
		sumSq += sumSquares32(p.Grad.Contiguous().F32())
	}
	norm := math.Sqrt(sumSq)
	coef := maxNorm / (norm + 1e-6)
	if coef >= 1 {
		return norm // multiplying by 1 is a no-op
	}
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		scaleInPlace(p.Grad, coef)
	}
	return norm
}

// sumSquares32 accumulates in float64 over blocks of float32 partial sums,
// which keeps the loop fast and the error far below float32 rounding.
func sumSquares32(x []float32) float64 {
	var total float64
	for len(x) > 0 {
		n := min(len(x), 256)
		var a0, a1, a2, a3 float32
		blk := x[:n]
		j := 0
		for ; j+4 <= n; j += 4 {
			a0 += blk[j] * blk[j]
			a1 += blk[j+1] * blk[j+1]
			a2 += blk[j+2] * blk[j+2]
			a3 += blk[j+3] * blk[j+3]
		}
		for ; j < n; j++ {
			a0 += blk[j] * blk[j]
		}
		total += float64(a0) + float64(a1) + float64(a2) + float64(a3)
		x = x[n:]
	}
	return total
}

// scaleInPlace multiplies t's elements by s. Gradients are always contiguous
// (the engine allocates them); a view would be a programmer error.
func scaleInPlace(t *tensor.Tensor, s float64) {
	if t.DType() == tensor.Float64 {
		d := t.F64()
		for i := range d {
			d[i] *= s
		}
		return
	}
	d, f := t.F32(), float32(s)
	for i := range d {
		d[i] *= f
	}
}
