package ddp

import "github.com/goddp/goddp/autograd"

// reachableLeaves walks the recorded graph from out and returns the leaves
// that requires-grad paths reach: the parameters that can receive a gradient
// when the loss is computed from out (torch's search_unused_parameters).
// Parameters outside this set are marked ready, with zero gradient, at the
// first hook of the iteration, so their buckets are not held back.
func reachableLeaves(out *autograd.Variable) map[*autograd.Variable]bool {
	seen := map[*autograd.Variable]bool{}
	leaves := map[*autograd.Variable]bool{}
	stack := []*autograd.Variable{out}
	seen[out] = true
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		op := v.Creator()
		if op == nil {
			if v.RequiresGrad() {
				leaves[v] = true
			}
			continue
		}
		for _, in := range op.Inputs() {
			if in != nil && in.RequiresGrad() && !seen[in] {
				seen[in] = true
				stack = append(stack, in)
			}
		}
	}
	return leaves
}
