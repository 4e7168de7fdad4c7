package autograd

import (
	"errors"
	"fmt"

	"goddp/tensor"
)

// ErrNonScalar is returned by Backward on a non-scalar output without a seed gradient.
var ErrNonScalar = errors.New("autograd: backward on a non-scalar output needs a seed gradient")

// ErrNoGrad is returned by Backward on a variable that does not require grad.
var ErrNoGrad = errors.New("autograd: backward on a variable that does not require grad")

// Pass is one running backward pass. Hooks use it to queue work that must run
// after every gradient is computed but before Backward returns (DDP's
// finalize).
type Pass struct {
	callbacks []func() error
}

// QueueCallback schedules fn to run once the pass has produced every
// gradient. Callbacks run in the order queued; the first error is returned
// from Backward.
func (p *Pass) QueueCallback(fn func() error) { p.callbacks = append(p.callbacks, fn) }

// Backward computes the gradient of the scalar v with respect to every leaf
// that requires grad, accumulating into their Grad fields.
func (v *Variable) Backward() error {
	if v.Value.Numel() != 1 {
		return fmt.Errorf("%w: shape %v", ErrNonScalar, v.Value.Shape())
	}
	seed := tensor.New(v.Value.DType(), v.Value.Shape()...)
	if seed.DType() == tensor.Float64 {
		seed.F64()[0] = 1
	} else {
		seed.F32()[0] = 1
	}
	return v.BackwardWith(seed)
}

// BackwardWith runs backward seeded with grad (same shape as v).
//
// Nodes are visited in reverse topological order. A leaf is reached only after
// every op that consumes it has run, so its gradient is final there: that is
// when its grad-ready hooks fire, while the rest of backward still runs.
func (v *Variable) BackwardWith(grad *tensor.Tensor) error {
	if !v.requiresGrad {
		return ErrNoGrad
	}
	if !sameShape(grad.Shape(), v.Value.Shape()) {
		return fmt.Errorf("autograd: seed gradient shape %v does not match output shape %v", grad.Shape(), v.Value.Shape())
	}
	order := topoSort(v)
	v.pending = grad
	pass := &Pass{}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		g := n.pending
		n.pending = nil
		if g == nil {
			continue // no path carried a gradient here
		}
		if n.creator == nil {
			n.accumulateLeaf(g)
			for _, h := range n.hooks {
				if h != nil {
					h(n, pass)
				}
			}
			continue
		}
		ins := n.creator.Inputs()
		grads := n.creator.Backward(g)
		if len(grads) != len(ins) {
			panic(fmt.Sprintf("autograd: op %s returned %d gradients for %d inputs", n.creator.Name(), len(grads), len(ins)))
		}
		for k, in := range ins {
			if in == nil || !in.requiresGrad || grads[k] == nil {
				continue
			}
			gk := reduceToShape(grads[k], in.Value.Shape(), n.creator.Name())
			if in.pending == nil {
				in.pending = gk
			} else {
				in.pending = addInto(in.pending, gk)
			}
		}
	}
	for _, cb := range pass.callbacks {
		if err := cb(); err != nil {
			return err
		}
	}
	return nil
}

// accumulateLeaf adds g into the leaf's Grad, reusing the buffer when there is one.
func (n *Variable) accumulateLeaf(g *tensor.Tensor) {
	if n.Grad == nil {
		// Own the memory: g may alias an op's internal buffer.
		n.Grad = g.Clone()
		return
	}
	addIntoExisting(n.Grad, g)
}

// topoSort returns every node reachable from root that requires grad, in
// topological order (inputs before consumers), iteratively to survive deep graphs.
func topoSort(root *Variable) []*Variable {
	var order []*Variable
	visited := map[*Variable]bool{}
	type frame struct {
		v    *Variable
		next int
	}
	stack := []frame{{v: root}}
	visited[root] = true
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		var ins []*Variable
		if top.v.creator != nil {
			ins = top.v.creator.Inputs()
		}
		if top.next < len(ins) {
			in := ins[top.next]
			top.next++
			if in != nil && in.requiresGrad && !visited[in] {
				visited[in] = true
				stack = append(stack, frame{v: in})
			}
			continue
		}
		order = append(order, top.v)
		stack = stack[:len(stack)-1]
	}
	return order
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
