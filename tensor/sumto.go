package tensor

import (
	"fmt"
	"slices"
)

// SumInto adds g, summed over the dimensions it was broadcast along, into
// dst: the one reduction that undoes broadcasting (a bias's gradient from
// its [rows, cols] output). dst is contiguous with a shape that broadcasts
// to g's. g may be a strided or broadcast view; it is read contiguous.
//
// Devices reduce equal shapes (an add) and a dst equal to g's trailing
// dimensions (column sums); anything else has no kernel there.
func SumInto(dst, g *Tensor) {
	gs, shape := g.shape, dst.shape
	if len(shape) > len(gs) {
		panic(fmt.Sprintf("tensor: SumInto: gradient of shape %v into %v", gs, shape))
	}
	lead := len(gs) - len(shape)
	for i, d := range shape {
		if d != 1 && d != gs[lead+i] {
			panic(fmt.Sprintf("tensor: SumInto: shape %v does not broadcast to %v", shape, gs))
		}
	}
	if onDevice(dst, g) {
		sumIntoDevice(dst, g, lead)
		return
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
	if g.dtype == Float64 {
		reduceSlice(dst.F64(), g.F64(), gs, outStrides)
	} else {
		reduceSlice(dst.F32(), g.F32(), gs, outStrides)
	}
}

// SumTo returns g summed over its broadcast dimensions down to shape, on
// g's device; g itself when the shapes already match.
func SumTo(g *Tensor, shape ...int) *Tensor {
	if equalInts(g.shape, shape) {
		return g
	}
	out := ZerosAs(g, shape...)
	SumInto(out, g)
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i, v := range a {
		if b[i] != v {
			return false
		}
	}
	return true
}

// sumIntoDevice reduces g over its broadcast dimensions into dst on the
// device. g's dimensions are collapsed into alternating runs of summed and
// kept ones; each summed run is reduced in turn, moved to the front by a
// Swap01 when kept dimensions precede it, then summed by SumRows.
func sumIntoDevice(dst, g *Tensor, lead int) {
	k := kernelsFor("SumInto", dst, g)
	NeedKernel(k.Axpy != nil, "SumInto", dst.Device())
	g = g.Contiguous()
	if numel(dst.shape) == numel(g.shape) {
		k.Axpy(dst, 1, g)
		return
	}
	NeedKernel(k.SumRows != nil && k.Swap01 != nil, "SumInto", dst.Device())
	type run struct {
		size   int
		summed bool
	}
	var runs []run
	for i, d := range g.shape {
		if d == 1 {
			continue
		}
		summed := i < lead || dst.shape[i-lead] == 1
		if n := len(runs); n > 0 && runs[n-1].summed == summed {
			runs[n-1].size *= d
			continue
		}
		runs = append(runs, run{d, summed})
	}
	cur := g
	for {
		j := slices.IndexFunc(runs, func(r run) bool { return r.summed })
		if j < 0 {
			break
		}
		outer, inner := 1, 1
		for _, r := range runs[:j] {
			outer *= r.size
		}
		for _, r := range runs[j+1:] {
			inner *= r.size
		}
		m := runs[j].size
		src := cur
		if outer > 1 {
			src = MustZerosOn(dst.Device(), m, outer, inner)
			k.Swap01(src, cur, outer, m, inner)
		}
		out := MustZerosOn(dst.Device(), outer*inner)
		k.SumRows(out, src.Reshape(m, outer*inner))
		cur = out
		runs = slices.Delete(runs, j, j+1)
		if j > 0 && j < len(runs) { // the kept runs on either side are now adjacent
			runs[j-1].size *= runs[j].size
			runs = slices.Delete(runs, j, j+1)
		}
	}
	k.Axpy(dst, 1, cur.Reshape(dst.shape...))
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
