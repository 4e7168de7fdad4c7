package autograd

import (
	"fmt"
	"slices"

	"goddp/tensor"
)

// reduceToShape sums a gradient computed at a broadcast shape back to the
// shape of the input it belongs to. This is the one place where broadcasting
// is undone; ops return gradients at the output's shape. It returns g itself
// when the shapes already match, otherwise a new tensor.
func reduceToShape(g *tensor.Tensor, shape []int, op string) *tensor.Tensor {
	if slices.Equal(g.Shape(), shape) {
		return g
	}
	tensor.OnCPU(op+"'s broadcast gradient reduction", g)
	out := tensor.New(g.DType(), shape...)
	reduceInto(out, g, op)
	return out
}

// reduceInto adds g, summed over its broadcast dimensions, into dst (a
// contiguous tensor of the input's shape). The engine uses it to reduce a
// broadcast gradient straight into a leaf's Grad without a temporary.
func reduceInto(dst, g *tensor.Tensor, op string) {
	tensor.OnCPU(op+"'s broadcast gradient reduction", dst, g)
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
	g = g.Contiguous()
	// outStrides maps each dimension of g to a stride in dst (0 where summed).
	outStrides := make([]int, len(gs))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 {
			outStrides[lead+i] = s
		}
		s *= shape[i]
	}
	if g.DType() == tensor.Float64 {
		reduceSlice(dst.F64(), g.F64(), gs, outStrides)
	} else {
		reduceSlice(dst.F32(), g.F32(), gs, outStrides)
	}
}

// reduceSlice adds src (C order over shape gs) into o under outStrides. It
// collapses g into [outer, inner] runs so common cases (a bias [cols] from
// [rows, cols], a column [rows, 1] from [rows, cols]) run as tight loops.
func reduceSlice[T float](o, src []T, gs, outStrides []int) {
	n := len(src)
	if n == 0 {
		return
	}
	// Innermost run: trailing dims that are all kept with contiguous dst
	// strides, or all summed.
	d := len(gs) - 1
	for d >= 0 && gs[d] == 1 {
		d--
	}
	if d < 0 { // single element
		o[0] += src[0]
		return
	}
	inner := 1
	keep := outStrides[d] != 0
	expect := 1
	e := d
	for ; e >= 0; e-- {
		if gs[e] == 1 {
			continue
		}
		if keep != (outStrides[e] != 0) || (keep && outStrides[e] != expect) {
			break
		}
		inner *= gs[e]
		if keep {
			expect *= gs[e]
		}
	}
	// idx walks the outer dims [0, e].
	idx := make([]int, e+1)
	base := 0
	for k := 0; k < n; k += inner {
		run := src[k : k+inner]
		if keep {
			out := o[base : base+inner]
			for j, x := range run {
				out[j] += x
			}
		} else {
			var acc T
			for _, x := range run {
				acc += x
			}
			o[base] += acc
		}
		for q := e; q >= 0; q-- {
			idx[q]++
			base += outStrides[q]
			if idx[q] < gs[q] {
				break
			}
			base -= outStrides[q] * idx[q]
			idx[q] = 0
		}
	}
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
	if !dst.IsCPU() || !b.IsCPU() {
		tensor.Axpy(dst, 1, b.Contiguous()) // the device's kernel; mixed devices panic there
		return
	}
	if !slices.Equal(b.Shape(), dst.Shape()) {
		b = b.Contiguous().Reshape(dst.Shape()...)
	}
	tensor.AddInto(dst, b) // d += s element by element, vectorised
}
