package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Dropout zeroes each element with probability P during training and scales
// the survivors by 1/(1-P); in eval mode it is the identity (torch's
// nn.Dropout). Masks are drawn from the layer's RNG exactly as torch's CPU
// dropout draws them (bernoulli_(1-p), see autograd.Dropout), so a run is
// reproducible from its seed; give it the RNG the model was initialised
// from to continue one stream as torch's global generator does (checkpoint
// the RNG's State to resume exactly).
type Dropout struct {
	stateless
	P   float64
	RNG *tensor.RNG
}

// NewDropout returns a Dropout layer drawing masks from rng. p must be in [0, 1].
func NewDropout(rng *tensor.RNG, p float64) *Dropout {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("nn: Dropout probability %v outside [0, 1]", p))
	}
	return &Dropout{P: p, RNG: rng}
}

// Forward implements Layer.
func (d *Dropout) Forward(x *autograd.Variable) *autograd.Variable {
	if !d.Training() || d.P == 0 {
		return x
	}
	return autograd.Dropout(x, d.P, d.RNG, true)
}
