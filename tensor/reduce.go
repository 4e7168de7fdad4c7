package tensor

import (
	"fmt"
	"slices"
)

// split3 returns the sizes (outer, n, inner) of shape around the dimension
// range [lo, hi): a contiguous tensor of that shape is an [outer, n, inner]
// array.
func split3(shape []int, lo, hi int) (outer, n, inner int) {
	return numel(shape[:lo]), numel(shape[lo:hi]), numel(shape[hi:])
}

// reduceAxes normalises, sorts and dedups axes; nil means all axes.
func reduceAxes(op string, axes []int, shape []int) []int {
	r := len(shape)
	if len(axes) == 0 { // nil or empty: every axis, as torch's dim=None/[]
		out := make([]int, r)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, len(axes))
	for _, a := range axes {
		out = append(out, normAxis(op, a, r, shape))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reducedShape drops (or sets to 1, with keepDim) the given sorted axes.
func reducedShape(shape, axes []int, keepDim bool) []int {
	out := make([]int, 0, len(shape))
	j := 0
	for i, d := range shape {
		if j < len(axes) && axes[j] == i {
			j++
			if keepDim {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

// Sum reduces a over axes (nil = all) by addition. With keepDim the reduced
// axes stay as size 1. float32 rows are accumulated in float64.
func Sum(a *Tensor, axes []int, keepDim bool) *Tensor {
	ax := reduceAxes("Sum", axes, a.shape)
	return sumAxes(a, ax, keepDim, 1)
}

// Mean is Sum divided by the number of reduced elements.
func Mean(a *Tensor, axes []int, keepDim bool) *Tensor {
	ax := reduceAxes("Mean", axes, a.shape)
	cnt := 1
	for _, x := range ax {
		cnt *= a.shape[x]
	}
	return sumAxes(a, ax, keepDim, 1/float64(cnt))
}

// SumAll returns the sum of every element, accumulated in float64 in a fixed
// order: sixteen interleaved partial sums (element i into lane i%16),
// combined pairwise (lane j += lane j+8, then j+4, j+2, j+1), then the
// elements after the last whole block of 16 added one by one. The order is
// the same on every CPU and build (vector kernels or Go loop), so the
// result is too; it is not a sequential sum's, and for float64 input the
// last bits can differ from one.
func SumAll(a *Tensor) float64 {
	c := a.Contiguous()
	if c.dtype == Float64 {
		return sumSlice(c.F64())
	}
	return sumSlice(c.F32())
}

// sumSlice is SumAll's sum of x.
func sumSlice[T float](x []T) float64 {
	if len(x) >= sumCMin {
		return sumC(x)
	}
	return sumSliceGo(x)
}

// sumSliceGo is sumSlice in Go (sum_kernels.c is the same order).
func sumSliceGo[T float](x []T) float64 {
	var acc [16]float64
	i := 0
	for ; i+16 <= len(x); i += 16 {
		b := x[i : i+16 : i+16]
		for j := range acc {
			acc[j] += float64(b[j])
		}
	}
	for w := 8; w >= 1; w /= 2 {
		for j := range w {
			acc[j] += acc[j+w]
		}
	}
	s := acc[0]
	for ; i < len(x); i++ {
		s += float64(x[i])
	}
	return s
}

// sumAxes sums over sorted axes and multiplies by scale. Runs of adjacent
// axes reduce in one pass; separate runs reduce one after another.
func sumAxes(a *Tensor, axes []int, keepDim bool, scale float64) *Tensor {
	final := reducedShape(a.shape, axes, keepDim)
	if len(axes) == 0 {
		// Nothing to reduce (a 0-D input): a scaled copy, never an alias.
		out := a.Clone()
		if scale != 1 {
			ScaleInto(out, scale)
		}
		return out.Reshape(final...)
	}
	cur := a.Contiguous()
	kept := cloneInts(a.shape) // shape with reduced axes set to 1 as we go
	for len(axes) > 0 {
		// Take the last run of consecutive axes.
		hi := len(axes) - 1
		lo := hi
		for lo > 0 && axes[lo-1] == axes[lo]-1 {
			lo--
		}
		first, last := axes[lo], axes[hi]+1
		outer, n, inner := split3(kept, first, last)
		s := 1.0
		if lo == 0 {
			s = scale
		}
		next := New(a.dtype, outer*inner)
		if a.dtype == Float64 {
			sumBlock(next.f64, cur.F64(), outer, n, inner, s)
		} else {
			sumBlock(next.f32, cur.F32(), outer, n, inner, s)
		}
		for i := first; i < last; i++ {
			kept[i] = 1
		}
		cur = next
		axes = axes[:lo]
	}
	return cur.Reshape(final...)
}

func sumBlock[T float](dst, src []T, outer, n, inner int, scale float64) {
	if inner == 1 {
		for o := 0; o < outer; o++ {
			dst[o] = T(sumSlice(src[o*n:(o+1)*n]) * scale)
		}
		return
	}
	for o := 0; o < outer; o++ {
		d := dst[o*inner : (o+1)*inner]
		clear(d)
		for r := 0; r < n; r++ {
			row := src[(o*n+r)*inner : (o*n+r+1)*inner]
			for j, v := range row {
				d[j] += v
			}
		}
		if scale != 1 {
			s := T(scale)
			for j := range d {
				d[j] *= s
			}
		}
	}
}

// Max returns the maximum along axis (NaN propagates, as torch).
func Max(a *Tensor, axis int, keepDim bool) *Tensor {
	v, _ := MaxWithIndex(a, axis, keepDim)
	return v
}

// ArgMax returns the index of the first maximum along axis for every
// position of the remaining dimensions, in row-major order.
func ArgMax(a *Tensor, axis int) []int {
	_, idx := MaxWithIndex(a, axis, false)
	return idx
}

// MaxWithIndex returns Max and ArgMax together (torch.max(a, dim)).
func MaxWithIndex(a *Tensor, axis int, keepDim bool) (*Tensor, []int) {
	if a.Dim() == 0 {
		return a.Clone(), []int{0}
	}
	ax := normAxis("Max", axis, a.Dim(), a.shape)
	if a.shape[ax] == 0 {
		panic(fmt.Sprintf("tensor: Max: empty axis %d in shape %s", axis, sh(a.shape)))
	}
	outer, n, inner := split3(a.shape, ax, ax+1)
	out := New(a.dtype, reducedShape(a.shape, []int{ax}, keepDim)...)
	idx := make([]int, outer*inner)
	c := a.Contiguous()
	if a.dtype == Float64 {
		maxBlock(out.f64, idx, c.F64(), outer, n, inner)
	} else {
		maxBlock(out.f32, idx, c.F32(), outer, n, inner)
	}
	return out, idx
}

func maxBlock[T float](dst []T, idx []int, src []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			base := o*n*inner + j
			best, bi := src[base], 0
			if best == best {
				for r := 1; r < n; r++ {
					v := src[base+r*inner]
					if v > best || v != v {
						best, bi = v, r
						if v != v {
							break
						}
					}
				}
			}
			dst[o*inner+j], idx[o*inner+j] = best, bi
		}
	}
}
