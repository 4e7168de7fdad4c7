//go:build !cuda

package gorgoniaddp

import (
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// graphOp is the autograd node standing for a whole gorgonia graph run:
// its inputs are the learnables' goddp leaves, its output the cost, and its
// Backward hands back the gradients the TapeMachine already computed. The
// autograd engine then accumulates them into the leaves' Grad and fires
// their grad-ready hooks, which is where ddp's Reducer takes over.
type graphOp struct {
	inputs []*autograd.Variable
	grads  []*tensor.Tensor // aliases of the TapeMachine's gradient values
}

func (o *graphOp) Name() string                 { return "GorgoniaGraph" }
func (o *graphOp) Inputs() []*autograd.Variable { return o.inputs }

// Backward scales the graph's gradients by the incoming scalar gradient
// (1 for loss.Backward()). They are returned borrowed: the engine copies.
func (o *graphOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	s := gy.Item()
	if s == 1 {
		return o.grads
	}
	out := make([]*tensor.Tensor, len(o.grads))
	for i, g := range o.grads {
		out[i] = tensor.MulScalar(g, s)
	}
	return out
}
