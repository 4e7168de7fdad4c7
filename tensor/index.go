package tensor

import (
	"fmt"

	"slices"
)

// Gather picks one element per position along axis: the result has a's shape
// without axis, and result[o, i] = a[o, index[o*inner+i], i] in row-major
// order over the remaining dimensions. It is torch.gather with an index of
// shape [..., 1, ...] squeezed, the form cross-entropy needs.
func Gather(a *Tensor, axis int, index []int) *Tensor {
	ax := normAxis("Gather", axis, a.Dim(), a.shape)
	outer, n, inner := split3(a.shape, ax, ax+1)
	if len(index) != outer*inner {
		panic(fmt.Sprintf("tensor: Gather: %d indices for shape %s along axis %d (want %d)", len(index), sh(a.shape), axis, outer*inner))
	}
	out := New(a.dtype, reducedShape(a.shape, []int{ax}, false)...)
	c := a.Contiguous()
	if a.dtype == Float64 {
		gatherBlock("Gather", out.f64, c.F64(), index, outer, n, inner, a.shape)
	} else {
		gatherBlock("Gather", out.f32, c.F32(), index, outer, n, inner, a.shape)
	}
	return out
}

func gatherBlock[T float](op string, dst, src []T, index []int, outer, n, inner int, shape []int) {
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			k := index[o*inner+j]
			if k < 0 || k >= n {
				panic(fmt.Sprintf("tensor: %s: index %d out of range [0, %d) for shape %s", op, k, n, sh(shape)))
			}
			dst[o*inner+j] = src[(o*n+k)*inner+j]
		}
	}
}

// ScatterAdd is Gather's adjoint: dst[o, index[o*inner+i], i] += src[o, i].
// dst must be contiguous; src has dst's shape without axis.
func ScatterAdd(dst *Tensor, axis int, index []int, src *Tensor) {
	checkDType("ScatterAdd", dst, src)
	ax := normAxis("ScatterAdd", axis, dst.Dim(), dst.shape)
	outer, n, inner := split3(dst.shape, ax, ax+1)
	if !dst.IsContiguous() || src.Numel() != outer*inner || len(index) != outer*inner {
		panic(fmt.Sprintf("tensor: ScatterAdd: dst %s, src %s, %d indices along axis %d do not match", sh(dst.shape), sh(src.shape), len(index), axis))
	}
	s := src.Contiguous()
	if dst.dtype == Float64 {
		scatterAddBlock(dst.F64(), s.F64(), index, outer, n, inner, dst.shape)
	} else {
		scatterAddBlock(dst.F32(), s.F32(), index, outer, n, inner, dst.shape)
	}
}

func scatterAddBlock[T float](dst, src []T, index []int, outer, n, inner int, shape []int) {
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			k := index[o*inner+j]
			if k < 0 || k >= n {
				panic(fmt.Sprintf("tensor: ScatterAdd: index %d out of range [0, %d) for shape %s", k, n, sh(shape)))
			}
			dst[(o*n+k)*inner+j] += src[o*inner+j]
		}
	}
}

// IndexSelect returns the slices of a at positions idx along axis
// (torch.index_select); the axis' length becomes len(idx).
func IndexSelect(a *Tensor, axis int, idx []int) *Tensor {
	ax := normAxis("IndexSelect", axis, a.Dim(), a.shape)
	outer, n, inner := split3(a.shape, ax, ax+1)
	shape := cloneInts(a.shape)
	shape[ax] = len(idx)
	out := New(a.dtype, shape...)
	c := a.Contiguous()
	for _, k := range idx {
		if k < 0 || k >= n {
			panic(fmt.Sprintf("tensor: IndexSelect: index %d out of range [0, %d) for shape %s axis %d", k, n, sh(a.shape), axis))
		}
	}
	if a.dtype == Float64 {
		selectBlock(out.f64, c.F64(), idx, outer, n, inner)
	} else {
		selectBlock(out.f32, c.F32(), idx, outer, n, inner)
	}
	return out
}

func selectBlock[T float](dst, src []T, idx []int, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		for j, k := range idx {
			copy(dst[(o*m+j)*inner:(o*m+j+1)*inner], src[(o*n+k)*inner:(o*n+k+1)*inner])
		}
	}
}

// IndexAdd is IndexSelect's adjoint: dst[.., idx[j], ..] += src[.., j, ..]
// along axis (torch.index_add_); repeated indices accumulate.
func IndexAdd(dst *Tensor, axis int, idx []int, src *Tensor) {
	checkDType("IndexAdd", dst, src)
	ax := normAxis("IndexAdd", axis, dst.Dim(), dst.shape)
	outer, n, inner := split3(dst.shape, ax, ax+1)
	want := cloneInts(dst.shape)
	want[ax] = len(idx)
	if !dst.IsContiguous() || !slices.Equal(want, src.shape) {
		panic(fmt.Sprintf("tensor: IndexAdd: dst %s, src %s, %d indices along axis %d do not match", sh(dst.shape), sh(src.shape), len(idx), axis))
	}
	for _, k := range idx {
		if k < 0 || k >= n {
			panic(fmt.Sprintf("tensor: IndexAdd: index %d out of range [0, %d) for shape %s", k, n, sh(dst.shape)))
		}
	}
	s := src.Contiguous()
	if dst.dtype == Float64 {
		indexAddBlock(dst.F64(), s.F64(), idx, outer, n, inner)
	} else {
		indexAddBlock(dst.F32(), s.F32(), idx, outer, n, inner)
	}
}

func indexAddBlock[T float](dst, src []T, idx []int, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		for j, k := range idx {
			d := dst[(o*n+k)*inner : (o*n+k+1)*inner]
			for i, v := range src[(o*m+j)*inner : (o*m+j+1)*inner] {
				d[i] += v
			}
		}
	}
}

// Concat joins tensors along axis; all other dimensions must agree.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("tensor: Concat: no tensors")
	}
	first := ts[0]
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
	out := New(first.dtype, shape...)
	outer, _, inner := split3(shape, ax, ax+1)
	at := 0
	for _, t := range ts {
		c := t.Contiguous()
		w := t.shape[ax] * inner
		for o := 0; o < outer; o++ {
			dst := o*total*inner + at*inner
			if first.dtype == Float64 {
				copy(out.f64[dst:dst+w], c.F64()[o*w:(o+1)*w])
			} else {
				copy(out.f32[dst:dst+w], c.F32()[o*w:(o+1)*w])
			}
		}
		at += t.shape[ax]
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
