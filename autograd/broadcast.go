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

// broadcastTo returns g broadcast to shape (g's shape must broadcast to it)
// as a contiguous tensor on g's device: a new one, or g itself when it is
// of shape already. It is the inverse of reduceToShape, used by reductions
// to spread their gradient back over the input.
func broadcastTo(g *tensor.Tensor, shape []int) *tensor.Tensor {
	gs := g.Shape()
	if len(gs) > len(shape) {
		panic(fmt.Sprintf("autograd: cannot broadcast gradient of shape %v to %v", gs, shape))
	}
	lead := len(shape) - len(gs)
	for i, d := range gs {
		if d != 1 && d != shape[lead+i] {
			panic(fmt.Sprintf("autograd: cannot broadcast gradient of shape %v to %v", gs, shape))
		}
	}
	return tensor.ExpandContiguous(g, shape...)
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
