package nn

import (
	"fmt"
	"strings"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Container is a Module assembled from registered parameters, buffers and
// child modules, the way torch's nn.Module registers attributes. Embed it in
// a struct to write a custom model:
//
//	type Net struct {
//		nn.Container
//		fc1, fc2 *nn.Linear
//	}
//
//	func NewNet(rng *tensor.RNG) *Net {
//		n := &Net{fc1: nn.NewLinear(rng, 784, 128), fc2: nn.NewLinear(rng, 128, 10)}
//		n.RegisterModule("fc1", n.fc1)
//		n.RegisterModule("fc2", n.fc2)
//		return n
//	}
//
// Names follow torch: a child's parameters appear as "fc1.weight". Its own
// parameters come first, then the children's, each in registration order; a
// parameter reachable under two names (weight tying) is listed once, under
// its first name, as torch's named_parameters does. The zero value is an
// empty module in training mode.
type Container struct {
	params   []NamedParameter
	buffers  []NamedBuffer
	children []NamedModule
	names    map[string]bool
	eval     bool
}

func (c *Container) claim(kind, name string) {
	if name == "" || strings.Contains(name, ".") {
		panic(fmt.Sprintf("nn: %s name %q must be non-empty and contain no dot", kind, name))
	}
	if c.names == nil {
		c.names = map[string]bool{}
	}
	if c.names[name] {
		panic(fmt.Sprintf("nn: %s name %q is already registered", kind, name))
	}
	c.names[name] = true
}

// RegisterParameter adds a parameter under name. Registering a name twice,
// an empty name or a dotted name panics (a programmer error).
func (c *Container) RegisterParameter(name string, p *autograd.Variable) {
	c.claim("parameter", name)
	c.params = append(c.params, NamedParameter{Name: name, Param: p})
}

// RegisterBuffer adds a non-trainable state tensor under name.
func (c *Container) RegisterBuffer(name string, b *tensor.Tensor) {
	c.claim("buffer", name)
	c.buffers = append(c.buffers, NamedBuffer{Name: name, Buffer: b})
}

// RegisterModule adds a child module under name and sets it to the
// container's current mode.
func (c *Container) RegisterModule(name string, m Module) {
	c.claim("module", name)
	m.Train(!c.eval)
	c.children = append(c.children, NamedModule{Name: name, Module: m})
}

// NamedChildren implements Parent.
func (c *Container) NamedChildren() []NamedModule {
	return append([]NamedModule(nil), c.children...)
}

// NamedParameters implements Module.
func (c *Container) NamedParameters() []NamedParameter {
	seen := map[*autograd.Variable]bool{}
	var out []NamedParameter
	add := func(prefix string, nps []NamedParameter) {
		for _, np := range nps {
			if np.Param == nil || seen[np.Param] {
				continue
			}
			seen[np.Param] = true
			out = append(out, NamedParameter{Name: prefix + np.Name, Param: np.Param})
		}
	}
	add("", c.params)
	for _, ch := range c.children {
		add(ch.Name+".", ch.Module.NamedParameters())
	}
	return out
}

// NamedBuffers implements Module.
func (c *Container) NamedBuffers() []NamedBuffer {
	seen := map[*tensor.Tensor]bool{}
	var out []NamedBuffer
	add := func(prefix string, nbs []NamedBuffer) {
		for _, nb := range nbs {
			if nb.Buffer == nil || seen[nb.Buffer] {
				continue
			}
			seen[nb.Buffer] = true
			out = append(out, NamedBuffer{Name: prefix + nb.Name, Buffer: nb.Buffer})
		}
	}
	add("", c.buffers)
	for _, ch := range c.children {
		add(ch.Name+".", ch.Module.NamedBuffers())
	}
	return out
}

// Train implements Module, recursively.
func (c *Container) Train(on bool) {
	c.eval = !on
	for _, ch := range c.children {
		ch.Module.Train(on)
	}
}

// Training implements Module.
func (c *Container) Training() bool { return !c.eval }
