package optim

import (
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
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
	var buf [16]*tensor.Tensor
	grads := buf[:0]
	for _, p := range params {
		if p.Grad != nil {
			grads = append(grads, p.Grad)
		}
	}
	return tensor.ClipGradNorm(grads, maxNorm)
}
