package autograd

import (
	"fmt"

	"slices"
)

// Stack joins same-shaped vs along a new axis (0..rank, negative counts from
// the end of the result's dims). Each input's gradient is its slice of gy.
func Stack(axis int, vs ...*Variable) *Variable {
	if len(vs) == 0 {
		panic("autograd: Stack: no inputs")
	}
	first := vs[0].Value.Shape()
	axis = normAxis("Stack", axis, len(first)+1)
	for _, v := range vs[1:] {
		if !slices.Equal(v.Value.Shape(), first) {
			panic(fmt.Sprintf("autograd: Stack: shape %v does not match %v", v.Value.Shape(), first))
		}
		sameDType("Stack", vs[0].Value, v.Value)
	}
	oshape := make([]int, 0, len(first)+1)
	oshape = append(oshape, first[:axis]...)
	oshape = append(oshape, len(vs))
	oshape = append(oshape, first[axis:]...)
	sizes := make([]int, len(vs))
	for k := range sizes {
		sizes[k] = 1
	}
	return concatAt("Stack", axis, oshape, sizes, vs)
}
