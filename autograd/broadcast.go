package autograd

import (
	"fmt"

	"goddp/tensor"
)

// reduceToShape sums a gradient computed at a broadcast shape back to the
// shape of the input it belongs to. This is the one place where broadcasting
// is undone; ops return gradients at the output's shape.
func reduceToShape(g *tensor.Tensor, shape []int, op string) *tensor.Tensor {
	gs := g.Shape()
	if sameShape(gs, shape) {
		return g
	}
	if len(shape) > len(gs) {
		panic(fmt.Sprintf("autograd: %s returned gradient of shape %v for input of shape %v", op, gs, shape))
	}
	lead := len(gs) - len(shape)
	for i, d := range shape {
		if d != 1 && d != gs[lead+i] {
			panic(fmt.Sprintf("autograd: %s returned gradient of shape %v, not broadcastable to input shape %v", op, gs, shape))
		}
	}
	g = g.Contiguous()
	out := tensor.New(g.DType(), shape...)
	// Map each element of g to its destination index in out.
	outStrides := make([]int, len(gs))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 {
			outStrides[lead+i] = s
		}
		s *= shape[i]
	}
	idx := make([]int, len(gs))
	n := g.Numel()
	dst := 0
	if g.DType() == tensor.Float64 {
		src, o := g.F64(), out.F64()
		for k := 0; k < n; k++ {
			o[dst] += src[k]
			dst = advance(idx, gs, outStrides, dst)
		}
	} else {
		src, o := g.F32(), out.F32()
		// Fast path: reducing a [rows, cols] gradient to [cols] (bias).
		if len(gs) == 2 && len(shape) == 1 && shape[0] == gs[1] {
			cols := gs[1]
			for r := 0; r < gs[0]; r++ {
				row := src[r*cols : (r+1)*cols]
				for c, x := range row {
					o[c] += x
				}
			}
			return out
		}
		for k := 0; k < n; k++ {
			o[dst] += src[k]
			dst = advance(idx, gs, outStrides, dst)
		}
	}
	return out
}

// advance steps the multi-index idx over shape in C order and returns the new
// destination offset under outStrides.
func advance(idx, shape, outStrides []int, dst int) int {
	for d := len(idx) - 1; d >= 0; d-- {
		idx[d]++
		dst += outStrides[d]
		if idx[d] < shape[d] {
			return dst
		}
		dst -= outStrides[d] * idx[d]
		idx[d] = 0
	}
	return dst
}

// addInto returns a+b, reusing a's buffer when a is contiguous and owned by
// the pass (pending gradients are never user-visible).
func addInto(a, b *tensor.Tensor) *tensor.Tensor {
	a = a.Contiguous()
	if a.Numel() != b.Numel() {
		panic(fmt.Sprintf("autograd: accumulating gradients of shapes %v and %v", a.Shape(), b.Shape()))
	}
	a = a.Clone()
	addIntoExisting(a, b)
	return a
}

// addIntoExisting adds b into dst in place.
func addIntoExisting(dst, b *tensor.Tensor) {
	b = b.Contiguous()
	if dst.Numel() != b.Numel() {
		panic(fmt.Sprintf("autograd: accumulating gradient of shape %v into %v", b.Shape(), dst.Shape()))
	}
	if dst.DType() == tensor.Float64 {
		d, s := dst.F64(), b.F64()
		for i := range d {
			d[i] += s[i]
		}
		return
	}
	d, s := dst.F32(), b.F32()
	for i := range d {
		d[i] += s[i]
	}
}
