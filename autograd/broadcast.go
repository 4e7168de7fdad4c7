package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// reduceToShape sums a gradient computed at a broadcast shape back to the
// shape of the input it belongs to. This is the one place where broadcasting
// is undone; ops return gradients at the output's shape. It returns g itself
// when the shapes already match, otherwise a new tensor on g's device.
func reduceToShape(g *tensor.Tensor, shape []int, op string) *tensor.Tensor {
	if slices.Equal(g.Shape(), shape) {
		return g
	}
	out := tensor.ZerosAs(g, shape...)
	reduceInto(out, g, op)
	return out
}

// reduceInto adds g, summed over its broadcast dimensions, into dst (a
// contiguous tensor of the input's shape). The engine uses it to reduce a
// broadcast gradient straight into a leaf's Grad without a temporary.
func reduceInto(dst, g *tensor.Tensor, op string) {
	gs, shape := g.Shape(), dst.Shape()
	if len(shape) > len(gs) {
		panic(fmt.Sprintf("autograd: %s returned gradient of shape %v for input of shape %v", op, gs, shape))
	}
	lead := len(gs) - len(shape)
	for i, d := range shape {
		if d != 1 && d != gs[lead+i] {
			panic(fmt.Sprintf("autograd: %s returned gradient of shape %v, not broadcastable to input shape %v", op, gs, shape))
		}
	}
	tensor.SumInto(dst, g)
}

// broadcastTo returns a new contiguous tensor of shape holding g broadcast to
// it (g's shape must broadcast to shape). It is the inverse of reduceToShape,
// used by reductions to spread their gradient back over the input.
func broadcastTo(g *tensor.Tensor, shape []int) *tensor.Tensor {
	gs := g.Shape()
	if len(gs) > len(shape) {
		panic(fmt.Sprintf("autograd: cannot broadcast gradient of shape %v to %v", gs, shape))
	}
	lead := len(shape) - len(gs)
	srcStrides := make([]int, len(shape))
	s := 1
	for i := len(gs) - 1; i >= 0; i-- {
		if gs[i] != 1 {
			if gs[i] != shape[lead+i] {
				panic(fmt.Sprintf("autograd: cannot broadcast gradient of shape %v to %v", gs, shape))
			}
			srcStrides[lead+i] = s
		}
		s *= gs[i]
	}
	g = g.Contiguous()
	out := tensor.New(g.DType(), shape...)
	if g.DType() == tensor.Float64 {
		broadcastSlice(out.F64(), g.F64(), shape, srcStrides)
	} else {
		broadcastSlice(out.F32(), g.F32(), shape, srcStrides)
	}
	return out
}

func broadcastSlice[T float](out, src []T, shape, srcStrides []int) {
	n := len(out)
	if n == 0 {
		return
	}
	d := len(shape) - 1
	inner := 1
	if d >= 0 && srcStrides[d] == 0 {
		// Trailing broadcast dims: fill runs with one value.
		for d >= 0 && srcStrides[d] == 0 {
			inner *= shape[d]
			d--
		}
		idx := make([]int, d+1)
		base := 0
		for k := 0; k < n; k += inner {
			v := src[base]
			run := out[k : k+inner]
			for j := range run {
				run[j] = v
			}
			base = step(idx, shape, srcStrides, base)
		}
		return
	}
	// Trailing kept dims: copy contiguous runs.
	expect := 1
	for d >= 0 && (shape[d] == 1 || srcStrides[d] == expect) {
		inner *= shape[d]
		expect *= shape[d]
		d--
	}
	idx := make([]int, d+1)
	base := 0
	for k := 0; k < n; k += inner {
		copy(out[k:k+inner], src[base:base+inner])
		base = step(idx, shape, srcStrides, base)
	}
}

// step advances the multi-index idx (over shape[:len(idx)]) in C order and
// returns the new offset under strides.
func step(idx, shape, strides []int, off int) int {
	for q := len(idx) - 1; q >= 0; q-- {
		idx[q]++
		off += strides[q]
		if idx[q] < shape[q] {
			return off
		}
		off -= strides[q] * idx[q]
		idx[q] = 0
	}
	return off
}

// addIntoExisting adds b into dst in place (same number of elements). b may
// be a strided or broadcast view at dst's shape (SumAll's gradient), which
// is added without materialising it.
func addIntoExisting(dst, b *tensor.Tensor) {
	if dst.Numel() != b.Numel() {
		panic(fmt.Sprintf("autograd: accumulating gradient of shape %v into %v", b.Shape(), dst.Shape()))
	}
	if !slices.Equal(b.Shape(), dst.Shape()) {
		b = b.Contiguous().Reshape(dst.Shape()...)
	}
	tensor.AddInto(dst, b) // d += s element by element, vectorised
}
