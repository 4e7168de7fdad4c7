package nn

import (
	"goddp/autograd"
	"goddp/tensor"
)

// NamedParameter is a parameter with its torch-style dotted name ("net.2.bias").
type NamedParameter struct {
	Name  string
	Param *autograd.Variable
}

// NamedBuffer is a non-trainable state tensor (e.g. BatchNorm running_mean).
type NamedBuffer struct {
	Name   string
	Buffer *tensor.Tensor
}

// Module is anything with named parameters and buffers and a train/eval mode.
// Parameters are returned in registration order, which is what torch's
// model.parameters() yields and what DDP buckets (in reverse).
type Module interface {
	NamedParameters() []NamedParameter
	NamedBuffers() []NamedBuffer
	// Train switches training mode (Dropout, BatchNorm) on or off, recursively.
	Train(on bool)
	Training() bool
}

// Layer is a Module with the common single-input forward.
type Layer interface {
	Module
	Forward(x *autograd.Variable) *autograd.Variable
}

// Parameters returns m's parameters in order.
func Parameters(m Module) []*autograd.Variable {
	nps := m.NamedParameters()
	ps := make([]*autograd.Variable, len(nps))
	for i, np := range nps {
		ps[i] = np.Param
	}
	return ps
}
