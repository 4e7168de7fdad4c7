package tensor

import (
	"fmt"

	"slices"
)

// Gather picks one element per position along axis: the result has a's shape
// without axis, and result[o, i] = a[o, index[o*inner+i], i] in row-major
// order over the remaining dimensions. It is torch.gather with an index of
// shape [..., 1, ...] squeezed, the form cross-entropy needs. It runs the
// Gather entry of a's device.
func Gather(a *Tensor, axis int, index []int) *Tensor {
	k := table("Gather", a)
	need(k.Gather != nil, "Gather", a)
	ax := normAxis("Gather", axis, a.Dim(), a.shape)
	outer, n, inner := split3(a.shape, ax, ax+1)
	if len(index) != outer*inner {
		panic(fmt.Sprintf("tensor: Gather: %d indices for shape %s along axis %d (want %d)", len(index), sh(a.shape), axis, outer*inner))
	}
	checkIndices("Gather", index, n, a.shape, axis)
	x := a.Contiguous()
	y := EmptyAs(x, reducedShape(a.shape, []int{ax}, false)...) // written whole
	k.Gather(y, x, index, outer, n, inner)
	return y
}

// checkIndices panics, naming op, the first index out of [0, n).
func checkIndices(op string, index []int, n int, shape []int, axis int) {
	for i, k := range index {
		if k < 0 || k >= n {
			panic(fmt.Sprintf("tensor: %s: index %d (position %d) out of range [0, %d) for shape %s axis %d", op, k, i, n, sh(shape), axis))
		}
	}
}

// ScatterAdd is Gather's adjoint: dst[o, index[o*inner+i], i] += src[o, i].
// dst must be contiguous; src has dst's shape without axis. It runs the
// ScatterAdd entry of their device.
func ScatterAdd(dst *Tensor, axis int, index []int, src *Tensor) {
	k := table("ScatterAdd", dst, src)
	need(k.ScatterAdd != nil, "ScatterAdd", dst)
	checkDType("ScatterAdd", dst, src)
	ax := normAxis("ScatterAdd", axis, dst.Dim(), dst.shape)
	outer, n, inner := split3(dst.shape, ax, ax+1)
	if !dst.IsContiguous() || src.Numel() != outer*inner || len(index) != outer*inner {
		panic(fmt.Sprintf("tensor: ScatterAdd: dst %s, src %s, %d indices along axis %d do not match", sh(dst.shape), sh(src.shape), len(index), axis))
	}
	checkIndices("ScatterAdd", index, n, dst.shape, axis)
	k.ScatterAdd(dst, src.Contiguous(), index, outer, n, inner)
}

// IndexSelect returns the slices of a at positions idx along axis
// (torch.index_select); the axis' length becomes len(idx). It runs the
// IndexSelect entry of a's device.
func IndexSelect(a *Tensor, axis int, idx []int) *Tensor {
	k := table("IndexSelect", a)
	need(k.IndexSelect != nil, "IndexSelect", a)
	ax := normAxis("IndexSelect", axis, a.Dim(), a.shape)
	outer, n, inner := split3(a.shape, ax, ax+1)
	checkIndices("IndexSelect", idx, n, a.shape, axis)
	shape := cloneInts(a.shape)
	shape[ax] = len(idx)
	x := a.Contiguous()
	y := EmptyAs(x, shape...) // written whole
	k.IndexSelect(y, x, idx, outer, n, inner)
	return y
}

// IndexAdd is IndexSelect's adjoint: dst[.., idx[j], ..] += src[.., j, ..]
// along axis (torch.index_add_); repeated indices accumulate, in the order
// of idx on every device. It runs the IndexAdd entry of their device.
func IndexAdd(dst *Tensor, axis int, idx []int, src *Tensor) {
	k := table("IndexAdd", dst, src)
	need(k.IndexAdd != nil, "IndexAdd", dst)
	checkDType("IndexAdd", dst, src)
	ax := normAxis("IndexAdd", axis, dst.Dim(), dst.shape)
	outer, n, inner := split3(dst.shape, ax, ax+1)
	want := cloneInts(dst.shape)
	want[ax] = len(idx)
	if !dst.IsContiguous() || !slices.Equal(want, src.shape) {
		panic(fmt.Sprintf("tensor: IndexAdd: dst %s, src %s, %d indices along axis %d do not match", sh(dst.shape), sh(src.shape), len(idx), axis))
	}
	checkIndices("IndexAdd", idx, n, dst.shape, axis)
	k.IndexAdd(dst, src.Contiguous(), idx, outer, n, inner)
}

// Concat joins tensors along axis; all other dimensions must agree. Each
// piece is one CopyBlock of their device.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("tensor: Concat: no tensors")
	}
	k := table("Concat", ts...)
	first := ts[0]
	need(k.CopyBlock != nil, "Concat", first)
	ax := normAxis("Concat", axis, first.Dim(), first.shape)
	shape := cloneInts(first.shape)
	total := 0
	for _, t := range ts {
		checkDType("Concat", first, t)
		ok := t.Dim() == first.Dim()
		for i := 0; ok && i < t.Dim(); i++ {
			ok = i == ax || t.shape[i] == first.shape[i]
		}
		if !ok {
			panic(fmt.Sprintf("tensor: Concat: shapes %s and %s differ outside axis %d", sh(first.shape), sh(t.shape), axis))
		}
		total += t.shape[ax]
	}
	shape[ax] = total
	out := EmptyAs(first, shape...) // the pieces cover it
	outer, _, inner := split3(shape, ax, ax+1)
	at := 0
	for _, t := range ts {
		if w := t.shape[ax] * inner; w > 0 && outer > 0 {
			k.CopyBlock(out, t.Contiguous(), outer, w, total*inner, at*inner, w, 0)
		}
		at += t.shape[ax]
	}
	return out
}

// NarrowCopy is Narrow(t, axis, start, length).Contiguous() in one
// CopyBlock of t's device: the piece of a concatenation's gradient that
// belongs to one of its inputs.
func NarrowCopy(t *Tensor, axis, start, length int) *Tensor {
	k := table("NarrowCopy", t)
	need(k.CopyBlock != nil, "NarrowCopy", t)
	ax := normAxis("NarrowCopy", axis, t.Dim(), t.shape)
	if start < 0 || length < 0 || start+length > t.shape[ax] {
		panic(fmt.Sprintf("tensor: NarrowCopy: [%d, %d) out of range for axis %d of shape %s", start, start+length, axis, sh(t.shape)))
	}
	outer, n, inner := split3(t.shape, ax, ax+1)
	shape := cloneInts(t.shape)
	shape[ax] = length
	out := EmptyAs(t, shape...) // written whole
	if w := length * inner; w > 0 && outer > 0 {
		k.CopyBlock(out, t.Contiguous(), outer, w, w, 0, n*inner, start*inner)
	}
	return out
}

// Stack joins equally shaped tensors along a new axis.
func Stack(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("tensor: Stack: no tensors")
	}
	ax := normAxis("Stack", axis, ts[0].Dim()+1, ts[0].shape)
	us := make([]*Tensor, len(ts))
	for i, t := range ts {
		if !slices.Equal(t.shape, ts[0].shape) {
			panic(fmt.Sprintf("tensor: Stack: shapes %s and %s differ", sh(ts[0].shape), sh(t.shape)))
		}
		us[i] = Unsqueeze(t, ax)
	}
	return Concat(ax, us...)
}
