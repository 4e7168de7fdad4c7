package nn

import "github.com/goddp/goddp/autograd"

// stateless is embedded by layers without parameters or buffers.
type stateless struct{ mode }

// NamedParameters implements Module (none).
func (stateless) NamedParameters() []NamedParameter { return nil }

// NamedBuffers implements Module (none).
func (stateless) NamedBuffers() []NamedBuffer { return nil }

// ReLU is max(x, 0) elementwise (torch's nn.ReLU).
type ReLU struct{ stateless }

// NewReLU returns a ReLU layer.
func NewReLU() *ReLU { return &ReLU{} }

// Forward implements Layer.
func (*ReLU) Forward(x *autograd.Variable) *autograd.Variable { return autograd.ReLU(x) }

// GELU is x·Φ(x) with the exact erf form (torch's nn.GELU(approximate='none')).
type GELU struct{ stateless }

// NewGELU returns a GELU layer.
func NewGELU() *GELU { return &GELU{} }

// Forward implements Layer.
func (*GELU) Forward(x *autograd.Variable) *autograd.Variable { return autograd.GELU(x) }

// Tanh is the hyperbolic tangent elementwise (torch's nn.Tanh).
type Tanh struct{ stateless }

// NewTanh returns a Tanh layer.
func NewTanh() *Tanh { return &Tanh{} }

// Forward implements Layer.
func (*Tanh) Forward(x *autograd.Variable) *autograd.Variable { return autograd.Tanh(x) }

// Sigmoid is 1/(1+e^-x) elementwise (torch's nn.Sigmoid).
type Sigmoid struct{ stateless }

// NewSigmoid returns a Sigmoid layer.
func NewSigmoid() *Sigmoid { return &Sigmoid{} }

// Forward implements Layer.
func (*Sigmoid) Forward(x *autograd.Variable) *autograd.Variable { return autograd.Sigmoid(x) }
