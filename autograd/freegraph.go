package autograd

import "github.com/goddp/goddp/tensor"

// FreeGraph declares v's graph finished, as dropping the last reference to
// it does in PyTorch: the storage of every intermediate value in it (the
// Value of each recorded node other than v and keep) goes back to the host
// allocator's cache at once, for the next step's tensors, instead of waiting
// for the garbage collector. Call it after Backward when the graph's
// intermediates are no longer read, typically at the end of a training step.
//
// What the caller still holds is never recycled: leaves (parameters,
// inputs) and their Grad, v and every variable in keep, and any storage one
// of those shares (a Reshape of a parameter, an output that is a view of an
// input). Nodes whose value was recycled have their tensor detached: reading
// it panics instead of returning another tensor's numbers. Backward through
// the freed graph panics too.
func (v *Variable) FreeGraph(keep ...*Variable) {
	var rec tensor.Recycler
	kept := make(map[*Variable]bool, len(keep)+1)
	kept[v] = true
	for _, k := range keep {
		kept[k] = true
	}
	var nodes []*Variable
	seen := map[*Variable]bool{v: true}
	stack := []*Variable{v}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rec.Keep(n.Grad)
		if n.creator == nil || kept[n] {
			rec.Keep(n.Value)
		} else {
			rec.Free(n.Value)
		}
		if n.creator == nil {
			continue
		}
		nodes = append(nodes, n)
		for _, t := range savedTensorsOf(n.creator) {
			rec.Free(t)
		}
		for _, in := range n.creator.Inputs() {
			if in != nil && !seen[in] {
				seen[in] = true
				stack = append(stack, in)
			}
		}
	}
	rec.Flush()
	// Drop the ops, and with them the tensors they saved for backward: the
	// values they saved are gone, so no backward may run through them.
	for _, n := range nodes {
		n.creator = &freedOp{name: n.creator.Name()}
	}
}

// savesTensors is implemented by ops that keep tensors of their own making
// for backward (attention's probabilities), so that FreeGraph recycles them
// with the graph's values. A listed tensor that shares storage with a kept
// one (a contiguous input that is a leaf) is kept all the same.
type savesTensors interface{ savedTensors() []*tensor.Tensor }

// SavesTensors is savesTensors for ops outside this package (a model's
// own ops): FreeGraph, and BackwardAndFree once the op's backward has run,
// recycle the listed tensors.
type SavesTensors interface{ SavedTensors() []*tensor.Tensor }

// savedTensorsOf returns what op lists as saved for backward, if anything.
func savedTensorsOf(op Op) []*tensor.Tensor {
	if st, ok := op.(savesTensors); ok {
		return st.savedTensors()
	}
	if st, ok := op.(SavesTensors); ok {
		return st.SavedTensors()
	}
	return nil
}

// freedOp stands in for an op whose graph FreeGraph freed.
type freedOp struct{ name string }

func (f *freedOp) Name() string        { return f.name }
func (f *freedOp) Inputs() []*Variable { return nil }
func (f *freedOp) Backward(*tensor.Tensor) []*tensor.Tensor {
	panic("autograd: backward through " + f.name + ", whose graph FreeGraph freed; run the forward again")
}
