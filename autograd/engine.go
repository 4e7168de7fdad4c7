package autograd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
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

	order []*Variable      // reachable nodes, inputs before consumers
	stack []topoFrame      // scratch for the iterative DFS
	dst   []*tensor.Tensor // scratch: leaf Grad buffers offered to an accumulator op

	// rec collects the gradients private to the pass (fresh or owned, see
	// deliver) and gives their storage back to the cache as soon as no
	// node's pending gradient refers to it (rec holds each pending
	// gradient's storage), after each op's backward: the next op's
	// gradient of the same size takes the block. Whatever became a leaf's
	// Grad is kept, and so is every value of the graph unless the pass
	// frees the graph.
	rec tensor.Recycler

	// free says the pass frees the graph as it goes (BackwardAndFree):
	// each node's value (but the root's and keep's) is held until its
	// creator's backward has run, which is the last to read it, and then
	// goes back with the tensors that op saved.
	free bool

	// Inline backing for the slices above, so that a pass over a typical
	// graph costs one allocation.
	orderBuf [64]*Variable
	stackBuf [32]topoFrame
	dstBuf   [4]*tensor.Tensor
}

func newPass() *Pass {
	p := &Pass{}
	p.order, p.stack, p.dst = p.orderBuf[:0], p.stackBuf[:0], p.dstBuf[:0]
	return p
}

type topoFrame struct {
	v    *Variable
	next int
}

// QueueCallback schedules fn to run once the pass has produced every
// gradient. Callbacks run in the order queued; the first error is returned
// from Backward.
func (p *Pass) QueueCallback(fn func() error) { p.callbacks = append(p.callbacks, fn) }

// FreshGrads is the exported form of the marker below, for ops outside
// this package (a model's own ops): an op with a FreshGrads method is
// treated as one with freshGrads.
type FreshGrads interface{ FreshGrads() }

// GradAccumulator is the exported form of gradAccumulator, for ops outside
// this package: BackwardInto follows backwardInto's contract.
type GradAccumulator interface {
	BackwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor
}

// FreeingBackward is implemented by ops that can write their input
// gradients over tensors they saved for backward (a loss's probabilities,
// an activation's derivative), so that the gradient costs no memory of its
// own. The engine calls BackwardFreeing instead of Backward only in a pass
// that frees the graph (BackwardAndFree), where no second backward may
// read what the op saved; its results must be fresh, as FreshGrads's. dst
// is nil unless the op is also a GradAccumulator, and then follows
// BackwardInto's contract.
type FreeingBackward interface {
	BackwardFreeing(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor
}

// isFresh reports whether op's gradients are fresh (freshGrads or
// FreshGrads).
func isFresh(op Op) bool {
	if _, ok := op.(freshGrads); ok {
		return true
	}
	_, ok := op.(FreshGrads)
	return ok
}

// accumulatorOf returns op's accumulating backward, if it has one.
func accumulatorOf(op Op) func(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	if a, ok := op.(gradAccumulator); ok {
		return a.backwardInto
	}
	if a, ok := op.(GradAccumulator); ok {
		return a.BackwardInto
	}
	return nil
}

// gradAccumulator is implemented by ops that can add an input's gradient
// straight into that input's existing leaf Grad buffer (a weight's dW = gy^T x
// as a GEMM with beta = 1), so a steady training step makes no
// parameter-sized temporary. The engine offers dst[k] only for an input that
// is a leaf with a contiguous Grad of the input's shape and dtype; the op must
// then add its whole gradient for input k into dst[k] and return nil at k.
// Other entries follow Backward's rules. The op must not keep dst.
type gradAccumulator interface {
	backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor
}

// inPlaceBackward is implemented by elementwise ops that can compute their
// input gradient by overwriting gy. The engine calls it only when gy is
// private to the pass (a gradient some fresh op produced), so nothing else
// sees the change; the result then counts as fresh.
type inPlaceBackward interface {
	backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor
}

// freshGrads marks ops whose Backward returns newly allocated, contiguous
// gradients that nothing else references. The engine may then adopt them as a
// leaf's Grad or add into them in place instead of copying. Ops that pass gy
// through (Add, Reshape, ...) must not implement it.
type freshGrads interface{ freshGrads() }

// broadcastGrads marks ops whose Backward (and any in-place or accumulating
// variant) takes a broadcast view of gy: strides 0 along dimensions longer
// than 1, as SumAll and MeanAll hand back the upstream scalar expanded to
// their input's shape instead of a materialised tensor. Before any other op
// runs, the engine copies such a gy into a fresh contiguous tensor.
type broadcastGrads interface{ broadcastGrads() }

// isBroadcastView reports whether t repeats storage elements (a stride of 0
// along a dimension longer than 1).
func isBroadcastView(t *tensor.Tensor) bool {
	st := t.Strides()
	for i, d := range t.Shape() {
		if d > 1 && st[i] == 0 {
			return true
		}
	}
	return false
}

// Backward computes the gradient of the scalar v with respect to every leaf
// that requires grad, accumulating into their Grad fields. The graph is
// kept, as torch's backward(retain_graph=True): values and what ops saved
// stay readable, and backward may run through it again.
func (v *Variable) Backward() error { return v.backwardSeeded(false, nil) }

// BackwardAndFree is Backward followed by FreeGraph(keep...), as torch's
// backward() without retain_graph followed by dropping the graph, except
// that the graph is freed while the pass runs: each intermediate value and
// what its op saved for backward go back to the allocator's cache as soon
// as the op's backward (the last one to read them) has run, and an op that
// can writes its gradient over what it saved (FreeingBackward). The next
// ops' gradients so take those blocks, and a step's peak memory is the
// forward's activations, not those plus the backward's gradients. v, keep,
// the leaves and their Grad are kept, as by FreeGraph; afterwards the
// graph is FreeGraph's: reading a freed value or running backward through
// it panics.
func (v *Variable) BackwardAndFree(keep ...*Variable) error {
	return v.backwardSeeded(true, keep)
}

func (v *Variable) backwardSeeded(free bool, keep []*Variable) error {
	if v.Value.Numel() != 1 {
		return fmt.Errorf("%w: shape %v", ErrNonScalar, v.Value.Shape())
	}
	seed := zerosLike(v.Value, v.Value.Shape()...)
	tensor.Fill(seed, 1) // on v's device: the one element is 1 in either dtype
	err := v.backward(seed, free, keep)
	if v.creator != nil && v.Grad != seed {
		// The seed is this call's own: a leaf's Grad only ever holds a
		// copy of a gradient the pass does not own, so nothing refers to
		// it now, and its block goes back to the cache (a device's
		// would wait for the garbage collector).
		tensor.ReleaseScratch(seed)
	}
	return err
}

// BackwardWith runs backward seeded with grad (same shape as v).
//
// Nodes run in reverse topological order, so an op's Backward runs only after
// every consumer of its output has delivered. Each node counts the consumers
// still to deliver in this pass; when a leaf's count reaches zero its
// gradient is final and its grad-ready hooks fire right there, while the rest
// of backward still runs (the last layer's parameters first).
func (v *Variable) BackwardWith(grad *tensor.Tensor) error { return v.backward(grad, false, nil) }

func (v *Variable) backward(grad *tensor.Tensor, free bool, keep []*Variable) error {
	if !v.requiresGrad {
		return ErrNoGrad
	}
	if !slices.Equal(grad.Shape(), v.Value.Shape()) {
		return fmt.Errorf("autograd: seed gradient shape %v does not match output shape %v", grad.Shape(), v.Value.Shape())
	}
	if grad.DType() != v.Value.DType() {
		return fmt.Errorf("autograd: seed gradient dtype %v does not match output dtype %v", grad.DType(), v.Value.DType())
	}
	pass := newPass()
	pass.free = free
	pass.topoSort(v)
	pass.rec.Keep(grad) // the caller's seed
	if free {
		pass.rec.Keep(v.Value)
		for _, k := range keep {
			if k != nil {
				pass.rec.Keep(k.Value)
			}
		}
	}
	defer func() {
		pass.release()
		if free {
			// Whatever the pass did not give back (what a pass cut
			// short by a panic still held) goes now, and the ops are
			// dropped.
			v.FreeGraph(keep...)
		}
	}()

	if v.creator == nil {
		// Backward on a leaf: its gradient is the seed.
		pass.deliver(v, grad, false)
	} else {
		v.pending = grad
		pass.rec.Hold(grad)
	}
	order := pass.order
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if n.creator == nil {
			continue // leaves are finished when their last consumer delivers
		}
		pass.run(n)
	}
	for _, cb := range pass.callbacks {
		if err := cb(); err != nil {
			return err
		}
	}
	return nil
}

// run calls n's op backward and delivers the input gradients. Then n's
// gradient is read no more, nor, when the pass frees the graph, n's value
// and what n's op saved: their storage goes back to the cache unless a
// pending gradient or a value still to be read shares it.
func (p *Pass) run(n *Variable) {
	op := n.creator
	ins := op.Inputs()
	gy, owned := n.pending, n.pendingOwned
	n.pending, n.pendingOwned = nil, false
	defer p.finish(n, gy)
	if gy == nil {
		// No path carried a gradient here; its inputs still count it as done.
		for _, in := range ins {
			if in != nil && in.mark == p {
				p.deliver(in, nil, false)
			}
		}
		return
	}
	if _, ok := op.(broadcastGrads); !ok && isBroadcastView(gy) {
		gy, owned = gy.Contiguous(), true
		p.rec.Free(gy)
	}
	var grads []*tensor.Tensor
	offered, done := false, false
	fresh := isFresh(op)
	fb, freeing := op.(FreeingBackward)
	freeing = freeing && p.free
	if ip, ok := op.(inPlaceBackward); ok && owned && gy.IsContiguous() {
		grads, done = ip.backwardInPlace(gy), true
	} else if acc := accumulatorOf(op); acc != nil || freeing {
		var dst []*tensor.Tensor
		if acc != nil {
			dst = p.dst[:0]
			for _, in := range ins {
				var d *tensor.Tensor
				if in != nil && in.mark == p && in.creator == nil && in.Grad != nil &&
					in.Grad.DType() == in.Value.DType() && in.Grad.IsContiguous() &&
					slices.Equal(in.Grad.Shape(), in.Value.Shape()) {
					d = in.Grad
					offered = true
				}
				dst = append(dst, d)
			}
			p.dst = dst
		}
		switch {
		case freeing:
			grads, done, fresh = fb.BackwardFreeing(gy, dst), true, true
		case offered:
			grads = acc(gy, dst)
		}
	}
	if !offered && !done {
		grads = op.Backward(gy)
	}
	if len(grads) != len(ins) {
		panic(fmt.Sprintf("autograd: op %s returned %d gradients for %d inputs", op.Name(), len(grads), len(ins)))
	}
	for k, in := range ins {
		if in == nil || in.mark != p {
			continue
		}
		if offered && p.dst[k] != nil {
			in.got = true // the op accumulated straight into in.Grad
			p.deliver(in, nil, false)
			continue
		}
		// A fresh op may still return a view (a broadcast of a new scalar);
		// only a contiguous gradient may be adopted or added into.
		p.deliver(in, grads[k], fresh && grads[k] != nil && grads[k].IsContiguous())
	}
	clear(p.dst)
}

// finish ends n's part of the pass once its op's backward has delivered:
// n's gradient gy (nil for none) is read no more and, when the pass frees
// the graph, neither are n's value and its op's saved tensors. What is
// neither kept nor held goes back to the cache now.
func (p *Pass) finish(n *Variable, gy *tensor.Tensor) {
	if gy != nil {
		p.rec.Drop(gy)
	}
	if p.free {
		p.rec.Drop(n.Value)
		p.rec.Free(n.Value)
		for _, t := range savedTensorsOf(n.creator) {
			p.rec.Free(t)
		}
	}
	p.rec.Recycle()
}

// deliver hands one consumer's gradient g (nil for none) to n. owned says g is
// private to the pass. It fires n's hooks when n is a leaf and this was its
// last consumer.
func (p *Pass) deliver(n *Variable, g *tensor.Tensor, owned bool) {
	if g != nil {
		if owned {
			// Private to the pass: recycled when it ends unless it
			// becomes a leaf's Grad (accumulateLeaf keeps it).
			p.rec.Free(g)
		}
		if g.DType() != n.Value.DType() {
			panic(fmt.Sprintf("autograd: gradient dtype %v for a %v variable of shape %v", g.DType(), n.Value.DType(), n.Value.Shape()))
		}
		if n.creator == nil {
			n.accumulateLeaf(g, owned)
			p.rec.Keep(n.Grad) // the caller's now, even if a hook swaps it
			n.got = true
		} else {
			n.accumulatePending(g, owned, &p.rec)
		}
		// An owned g that became no one's (added into a Grad or a
		// pending gradient) goes back at the op's finish.
	}
	n.deps--
	if n.deps <= 0 && n.creator == nil && n.got {
		for _, h := range n.hooks {
			if h != nil {
				h(n, p)
			}
		}
	}
}

// accumulateLeaf adds g (at n's shape or broadcast to it) into the leaf's
// Grad, reusing the buffer when there is one.
func (n *Variable) accumulateLeaf(g *tensor.Tensor, owned bool) {
	shape := n.Value.Shape()
	if n.Grad != nil {
		if slices.Equal(g.Shape(), shape) {
			addIntoExisting(n.Grad, g)
		} else {
			reduceInto(n.Grad, g, n.opName())
		}
		return
	}
	if !slices.Equal(g.Shape(), shape) {
		n.Grad = reduceToShape(g, shape, n.opName())
		return
	}
	if owned && g.IsContiguous() {
		n.Grad = g
		return
	}
	// Own the memory: g may alias an op's internal buffer or another gradient.
	n.Grad = g.Clone()
}

// accumulatePending adds g into a non-leaf's pending gradient for this pass.
// The tensors it makes are private to the pass and go to rec; rec holds
// the storage of the pending gradient until n's op has run.
func (n *Variable) accumulatePending(g *tensor.Tensor, owned bool, rec *tensor.Recycler) {
	shape := n.Value.Shape()
	if !slices.Equal(g.Shape(), shape) {
		g = reduceToShape(g, shape, n.opName())
		owned = true
		rec.Free(g)
	}
	switch {
	case n.pending == nil:
		n.pending, n.pendingOwned = g, owned
		rec.Hold(g)
	case n.pendingOwned:
		addIntoExisting(n.pending, g)
	case owned && g.IsContiguous():
		addIntoExisting(g, n.pending)
		rec.Drop(n.pending)
		n.pending, n.pendingOwned = g, true
		rec.Hold(g)
	default:
		sum := n.pending.Clone()
		rec.Free(sum)
		addIntoExisting(sum, g)
		rec.Drop(n.pending)
		n.pending, n.pendingOwned = sum, true
		rec.Hold(sum)
	}
}

func (n *Variable) opName() string {
	if n.creator == nil {
		return "leaf"
	}
	return n.creator.Name()
}

// topoSort collects every node reachable from root through variables that
// require grad, in topological order (inputs before consumers), iteratively
// to survive deep graphs. It marks each node with the pass and counts its
// consumer edges.
func (p *Pass) topoSort(root *Variable) {
	root.mark, root.deps, root.got, root.pending, root.pendingOwned = p, 0, false, nil, false
	p.claim(root)
	p.stack = append(p.stack[:0], topoFrame{v: root})
	for len(p.stack) > 0 {
		top := &p.stack[len(p.stack)-1]
		var ins []*Variable
		if top.v.creator != nil {
			ins = top.v.creator.Inputs()
		}
		if top.next < len(ins) {
			in := ins[top.next]
			top.next++
			if in == nil || !in.requiresGrad {
				continue
			}
			if in.mark != p {
				in.mark, in.deps, in.got, in.pending, in.pendingOwned = p, 0, false, nil, false
				p.stack = append(p.stack, topoFrame{v: in})
				p.claim(in)
			}
			in.deps++
			continue
		}
		p.order = append(p.order, top.v)
		p.stack = p.stack[:len(p.stack)-1]
	}
}

// claim protects n's value for the pass: a leaf's is the caller's, and so
// is every value unless the pass frees the graph; then a non-leaf's value
// is held until its creator's backward has run (finish). A gradient that
// shares a value's storage (an op may hand back a saved tensor or a view
// of one) is so never recycled while the value is needed.
func (p *Pass) claim(n *Variable) {
	switch {
	case n.creator == nil:
		p.rec.Keep(n.Value)
		p.rec.Keep(n.Grad)
	case p.free:
		p.rec.Hold(n.Value)
	default:
		p.rec.Keep(n.Value)
	}
}

// release clears the per-pass state on every node so the pass keeps nothing
// alive, and recycles the pass's private gradients. Every value and Grad in
// the graph is kept: an op may have handed back a saved tensor, or a view of
// one, as a gradient, and those belong to the graph, not to the pass.
func (p *Pass) release() {
	for _, n := range p.order {
		p.rec.Keep(n.Value)
		p.rec.Keep(n.Grad)
		p.rec.Keep(n.pending) // a pass cut short by a panic
		n.mark, n.deps, n.got, n.pending, n.pendingOwned = nil, 0, false, nil, false
	}
	p.rec.Flush()
	clear(p.order)
	p.order = p.order[:0]
}
