package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Dropout zeroes each element of a with probability p and scales the rest by
// 1/(1-p), drawing from rng (inverted dropout, as torch). When training is
// false or p is 0 it returns a itself. The gradient is gy times the same mask.
//
// On the host the mask is torch's CPU one, bit for bit: torch computes
// noise = bernoulli_(1-p) (one float64 uniform per element, kept when it is
// below 1-p), noise /= (1-p) in the tensor's dtype, and returns a·noise; so
// the same generator state gives the same zeros and the same scaled values.
//
// On a device the mask is not the CPU's: each call draws one seed from rng
// and the device keeps element i where a counter-based hash of (seed, i)
// says so (tensor.Dropout), so sim and cuda draw the same masks, and
// backward regenerates the mask from the seed rather than storing it.
func Dropout(a *Variable, p float64, rng *tensor.RNG, training bool) *Variable {
	if p < 0 || p > 1 {
		panic(fmt.Sprintf("autograd: Dropout: probability %v not in [0, 1]", p))
	}
	if !training || p == 0 {
		return a
	}
	y, st := tensor.Dropout(a.Value, p, rng)
	return FromOp(y, &dropoutOp{inputs: ins(a), st: st})
}

type dropoutOp struct {
	inputs
	st tensor.DropoutState // the mask, or the seed it is drawn from
}

func (o *dropoutOp) Name() string { return "Dropout" }
func (o *dropoutOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the mask. Left to the garbage
// collector, it held a block of the host cache's size class that the next
// step then missed: a convnet's Dropout(1024) at batch 64 cost a fresh,
// zeroed 256 KB allocation every step.
func (o *dropoutOp) savedTensors() []*tensor.Tensor {
	if m := o.st.Scratch(); m != nil {
		return []*tensor.Tensor{m}
	}
	return nil
}

func (o *dropoutOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.DropoutBackward(gy, o.st, false)}
}

func (o *dropoutOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.DropoutBackward(gy, o.st, true)}
}
