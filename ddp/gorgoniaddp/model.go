//go:build !cuda

package gorgoniaddp

import (
	"errors"
	"fmt"
	"unsafe"

	G "gorgonia.org/gorgonia"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/tensor/gorgoniatensor"
)

// Model adapts a gorgonia *ExprGraph (learnables plus a scalar cost node)
// to nn.Layer, so that ddp.Wrap accepts it. Each learnable becomes a goddp
// leaf parameter that shares the learnable's memory: ddp's broadcast at
// Wrap and goddp's optimizers write straight into the graph's values.
type Model struct {
	cost       *G.Node
	learnables G.Nodes
	input      *G.Node
	vm         G.VM
	params     []nn.NamedParameter
	base       []unsafe.Pointer // each learnable's storage at New
	dtype      tensor.DType     // the cost's
	training   bool
}

var _ nn.Layer = (*Model)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	input  *G.Node
	vmOpts []G.VMOpt
}

// WithInput names the input node that Forward(x) binds x to (with
// gorgonia.Let). Without it, bind inputs yourself before each step.
func WithInput(n *G.Node) Option { return func(c *config) { c.input = n } }

// WithVMOpts passes extra options to gorgonia.NewTapeMachine (e.g.
// gorgonia.WithLogger). BindDualValues is always added.
func WithVMOpts(opts ...G.VMOpt) Option {
	return func(c *config) { c.vmOpts = append(c.vmOpts, opts...) }
}

// New differentiates cost with respect to learnables (gorgonia.Grad),
// compiles a TapeMachine with the learnables' dual values bound, and wraps
// each learnable as a goddp parameter named after its node. Every learnable
// needs a float32 or float64 value (gorgonia.WithValue or WithInit) and a
// unique non-empty name; cost must be a scalar. Do not call gorgonia.Grad
// on the graph yourself.
func New(cost *G.Node, learnables G.Nodes, opts ...Option) (*Model, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cost == nil || len(learnables) == 0 {
		return nil, fmt.Errorf("%w: need a cost node and at least one learnable", ErrGraph)
	}
	if !cost.IsScalar() {
		return nil, fmt.Errorf("%w: cost %q has shape %v, want a scalar", ErrGraph, cost.Name(), cost.Shape())
	}
	m := &Model{cost: cost, learnables: learnables, input: cfg.input, training: true, dtype: tensor.Float64}
	if cost.Dtype().Name() == "float32" {
		m.dtype = tensor.Float32
	}
	seen := map[string]bool{}
	for i, n := range learnables {
		name := n.Name()
		if name == "" || seen[name] {
			return nil, fmt.Errorf("%w: learnable %d has an empty or duplicate name %q (name nodes with gorgonia.WithName)", ErrGraph, i, name)
		}
		seen[name] = true
		if n.Graph() != cost.Graph() {
			return nil, fmt.Errorf("%w: learnable %q is not in the cost's graph", ErrGraph, name)
		}
		t, err := alias(n.Value())
		if err != nil {
			return nil, fmt.Errorf("%w: learnable %q: %v", ErrGraph, name, err)
		}
		m.params = append(m.params, nn.NamedParameter{Name: name, Param: autograd.Param(t)})
		m.base = append(m.base, firstElem(t))
	}
	if _, err := G.Grad(cost, learnables...); err != nil {
		return nil, fmt.Errorf("%w: gorgonia.Grad: %w", ErrGraph, err)
	}
	m.vm = G.NewTapeMachine(cost.Graph(), append([]G.VMOpt{G.BindDualValues(learnables...)}, cfg.vmOpts...)...)
	return m, nil
}

// NamedParameters returns the learnables as goddp parameters, in the order
// given to New.
func (m *Model) NamedParameters() []nn.NamedParameter { return m.params }

// NamedBuffers returns nothing: an ExprGraph's non-learnable values are its
// inputs, bound each step.
func (m *Model) NamedBuffers() []nn.NamedBuffer { return nil }

// Train records the mode; a gorgonia graph has none of its own (build a
// separate graph for evaluation).
func (m *Model) Train(on bool)  { m.training = on }
func (m *Model) Training() bool { return m.training }

// Learnables returns the gorgonia nodes, in the order of NamedParameters.
func (m *Model) Learnables() G.Nodes { return m.learnables }

// Machine returns the TapeMachine, e.g. to Let inputs through it.
func (m *Model) Machine() G.VM { return m.vm }

// Close releases the TapeMachine.
func (m *Model) Close() error { return m.vm.Close() }

// Loss runs the graph once, forward and backward (the TapeMachine computes
// both), and returns the cost as a goddp variable whose creator hands the
// TapeMachine's gradients to the learnables' leaves when loss.Backward()
// runs. Bind the inputs first (gorgonia.Let). The gradients are this run's
// alone: gorgonia's accumulated dual values are zeroed before it.
func (m *Model) Loss() (*autograd.Variable, error) {
	for i, n := range m.learnables {
		if !m.bound(i) {
			return nil, fmt.Errorf("%w: %q", ErrRebound, n.Name())
		}
		if g, err := n.Grad(); err == nil {
			zeroValue(g)
		}
	}
	m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	cost, ok := scalarOf(m.cost.Value())
	if !ok {
		return nil, fmt.Errorf("%w: cost %q gave %T, not a scalar", ErrRun, m.cost.Name(), m.cost.Value())
	}
	op := &graphOp{inputs: make([]*autograd.Variable, len(m.params)), grads: make([]*tensor.Tensor, len(m.params))}
	for i, p := range m.params {
		op.inputs[i] = p.Param
		gv, err := m.learnables[i].Grad()
		if err != nil {
			return nil, fmt.Errorf("%w: gradient of %q: %w", ErrRun, p.Name, err)
		}
		g, err := alias(gv)
		if err != nil {
			return nil, fmt.Errorf("%w: gradient of %q: %v", ErrRun, p.Name, err)
		}
		if g.Numel() != p.Param.Value.Numel() || g.DType() != p.Param.Value.DType() {
			return nil, fmt.Errorf("%w: gradient of %q has %d %v elements, the value %d %v", ErrRun, p.Name, g.Numel(), g.DType(), p.Param.Value.Numel(), p.Param.Value.DType())
		}
		op.grads[i] = g.Reshape(p.Param.Value.Shape()...)
	}
	return autograd.FromOp(tensor.Scalar(m.dtype, cost), op), nil
}

// Forward binds x to the WithInput node (when x is not nil) and returns
// Loss(). It exists so that ddp.Wrap accepts the Model as an nn.Layer; it
// panics when the graph fails, which on a fixed-shape graph means a
// programmer error such as a wrongly shaped input. Step and Loss return
// the error instead.
func (m *Model) Forward(x *autograd.Variable) *autograd.Variable {
	if err := m.bindInput(x); err != nil {
		panic(err.Error())
	}
	out, err := m.Loss()
	if err != nil {
		panic(err.Error())
	}
	return out
}

func (m *Model) bindInput(x *autograd.Variable) error {
	if x == nil {
		return nil
	}
	if m.input == nil {
		return fmt.Errorf("%w: Forward got an input but New was given no WithInput node", ErrGraph)
	}
	if err := G.Let(m.input, gorgoniatensor.ToDense(x.Value)); err != nil {
		return fmt.Errorf("%w: binding the input %q: %w", ErrRun, m.input.Name(), err)
	}
	return nil
}

// bound reports whether learnable i still shares its parameter's memory.
func (m *Model) bound(i int) bool {
	t, err := alias(m.learnables[i].Value())
	return err == nil && firstElem(t) == m.base[i]
}

// CopyGradsToGraph writes each parameter's Grad (after DDP: the average
// over ranks) into the learnable's gorgonia gradient, so that a gorgonia
// Solver can take the step: solver.Step(gorgonia.NodesToValueGrads(m.Learnables())).
// A parameter without a Grad gets zeros.
func (m *Model) CopyGradsToGraph() error {
	var errs []error
	for i, p := range m.params {
		gv, err := m.learnables[i].Grad()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %q has no gorgonia gradient yet (run Loss first): %w", ErrRun, p.Name, err))
			continue
		}
		g, err := alias(gv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: gradient of %q: %v", ErrRun, p.Name, err))
			continue
		}
		if p.Param.Grad == nil {
			tensor.Fill(g, 0)
			continue
		}
		tensor.CopyFrom(g, p.Param.Grad.Reshape(g.Shape()...))
	}
	return errors.Join(errs...)
}
