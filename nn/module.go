package nn

import (
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
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

// NamedModule is a child module with its attribute name ("0", "net").
type NamedModule struct {
	Name   string
	Module Module
}

// Parent is a Module made of named child modules (Sequential, Container).
// StateDict uses it to order keys as torch does: a module's own parameters,
// then its own buffers, then each child's keys in registration order. A
// Parent's own parameters and buffers are the entries of NamedParameters and
// NamedBuffers whose names contain no dot.
type Parent interface {
	Module
	NamedChildren() []NamedModule
}

// Buffers returns m's buffers in order.
func Buffers(m Module) []*tensor.Tensor {
	nbs := m.NamedBuffers()
	bs := make([]*tensor.Tensor, len(nbs))
	for i, nb := range nbs {
		bs[i] = nb.Buffer
	}
	return bs
}

// Eval switches m and its children to evaluation mode (torch's m.eval()).
func Eval(m Module) { m.Train(false) }

// ZeroGrad zeroes the gradients of m's parameters in place, keeping the
// buffers (torch's zero_grad(set_to_none=False)).
func ZeroGrad(m Module) {
	for _, np := range m.NamedParameters() {
		np.Param.ZeroGrad()
	}
}

// NoGrad runs fn with gradient recording switched off for m's parameters
// (torch's `with torch.no_grad():` around inference), restoring it after.
// Inputs that require grad still record; pass them through autograd.NoGrad
// yourself if needed.
func NoGrad(m Module, fn func()) { autograd.NoGrad(Parameters(m), fn) }

// mode is the train/eval flag of a leaf module. The zero value is training,
// torch's default for a new module.
type mode struct{ eval bool }

// Train implements Module.
func (m *mode) Train(on bool) { m.eval = !on }

// Training implements Module.
func (m *mode) Training() bool { return !m.eval }
