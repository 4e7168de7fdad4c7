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

// Forward implements Layer.
func (s *Sequential) Forward(x *autograd.Variable) *autograd.Variable {
	for _, l := range s.layers {
		x = l.Forward(x)
	}
	return x
}
