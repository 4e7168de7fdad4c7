package optim

import (
	"math"

	"gonum.org/v1/gonum/blas/gonum"

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
//
// On a device the norm, the coefficient and the scaling stay there (one
// kernel for the squares of each gradient, one for the coefficient, one
// scaling each gradient by it); reading the returned norm waits for them.
func ClipGradNorm(params []*autograd.Variable, maxNorm float64) float64 {
	for _, p := range params {
		if p.Grad != nil && !p.Grad.IsCPU() {
			return clipGradNormDevice(params, maxNorm)
		}
	}
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

// sumSquares32 is the float64-accumulated dot product of x with itself
// (SIMD on amd64).
func sumSquares32(x []float32) float64 {
	return gonum.Implementation{}.Dsdot(len(x), x, 1, x, 1)
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
	d := t.F32()
	axpy(float32(s-1), d, d) // d += (s-1)*d, SIMD

}
