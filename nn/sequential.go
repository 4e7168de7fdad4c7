package nn

import (
	"strconv"

	"github.com/goddp/goddp/autograd"
)

// Sequential chains layers, feeding each one's output to the next (torch's
// nn.Sequential). Children are named by position: "0.weight", "2.bias".
type Sequential struct {
	Container
	layers []Layer
}

// NewSequential returns the chain of layers.
func NewSequential(layers ...Layer) *Sequential {
	s := &Sequential{}
	for _, l := range layers {
		s.Append(l)
	}
	return s
}

// Append adds a layer at the end, named by its index.
func (s *Sequential) Append(l Layer) {
	s.RegisterModule(strconv.Itoa(len(s.layers)), l)
	s.layers = append(s.layers, l)
}

// Len returns the number of layers.
func (s *Sequential) Len() int { return len(s.layers) }

// At returns layer i.
func (s *Sequential) At(i int) Layer { return s.layers[i] }

// Forward implements Layer. A Conv2d followed by a ReLU runs as one op,
// autograd.Conv2dReLU: the same values and gradients, with the ReLU inside
// the convolution's kernel where the engine has one. The convolution's
// output before the ReLU is never materialised; nothing in a Sequential
// reads it. When a MaxPool2d follows too, the three run as
// autograd.Conv2dReLUMaxPool2d, whose backward applies ReLU's mask to the
// pooled gradient instead of the convolution's.
func (s *Sequential) Forward(x *autograd.Variable) *autograd.Variable {
	for i := 0; i < len(s.layers); i++ {
		if c, ok := s.layers[i].(*Conv2d); ok && i+1 < len(s.layers) {
			if _, relu := s.layers[i+1].(*ReLU); relu {
				if i+2 < len(s.layers) {
					if p, pool := s.layers[i+2].(*MaxPool2d); pool {
						x = autograd.Conv2dReLUMaxPool2d(x, c.Weight, c.Bias, c.Params, p.Params)
						i += 2
						continue
					}
				}
				x = autograd.Conv2dReLU(x, c.Weight, c.Bias, c.Params)
				i++
				continue
			}
		}
		x = s.layers[i].Forward(x)
	}
	return x
}
