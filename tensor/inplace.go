package tensor

import (
	"fmt"

	"slices"
)

// In-place helpers for optimizers and hot loops. On contiguous operands of
// equal shape they are a single slice loop and allocate nothing.

// CopyFrom copies src into dst. src must broadcast to dst's shape; dst may
// be a strided view (e.g. a Narrow of a larger tensor).
func CopyFrom(dst, src *Tensor) {
	checkDType("CopyFrom", dst, src)
	if dst.dev != nil || src.dev != nil {
		deviceInPlace("CopyFrom", dst, src, func(k *Kernels) bool { return k.Copy != nil }, func(k *Kernels) { k.Copy(dst, src) })
		return
	}
	if dst.IsContiguous() && src.IsContiguous() && slices.Equal(dst.shape, src.shape) {
		n := dst.Numel()
		if dst.dtype == Float64 {
			copy(dst.f64[dst.offset:dst.offset+n], src.f64[src.offset:src.offset+n])
		} else {
			copy(dst.f32[dst.offset:dst.offset+n], src.f32[src.offset:src.offset+n])
		}
		return
	}
	checkBroadcastTo("CopyFrom", src.shape, dst.shape)
	if rows, ok := rowBroadcast(dst, src); ok {
		if dst.dtype == Float64 {
			copyRows(dst.f64[dst.offset:dst.offset+dst.Numel()], src.f64[src.offset:src.offset+rows])
		} else {
			copyRows(dst.f32[dst.offset:dst.offset+dst.Numel()], src.f32[src.offset:src.offset+rows])
		}
		return
	}
	if dst.dtype == Float64 {
		assignStrided(dst, dst.f64, src, src.f64, func(_, s float64) float64 { return s })
	} else {
		assignStrided(dst, dst.f32, src, src.f32, func(_, s float32) float32 { return s })
	}
}

// Fill sets every element of t (which may be a view) to v.
func Fill(t *Tensor, v float64) {
	if t.dev != nil {
		deviceInPlace("Fill", t, nil, func(k *Kernels) bool { return k.Fill != nil }, func(k *Kernels) { k.Fill(t, float32(v)) })
		return
	}
	if t.IsContiguous() {
		n := t.Numel()
		if t.dtype == Float64 {
			fillSlice(t.f64[t.offset:t.offset+n], v)
		} else {
			fillSlice(t.f32[t.offset:t.offset+n], float32(v))
		}
		return
	}
	s := Full(t.dtype, v)
	CopyFrom(t, s)
}

func fillSlice[T float](s []T, v T) {
	if v == 0 {
		clear(s)
		return
	}
	for i := range s {
		s[i] = v
	}
}

// AddInto does dst += src, with src broadcast to dst's shape.
func AddInto(dst, src *Tensor) { Axpy(dst, 1, src) }

// Axpy does dst += alpha*x, with x broadcast to dst's shape.
func Axpy(dst *Tensor, alpha float64, x *Tensor) {
	checkDType("Axpy", dst, x)
	if dst.dev != nil || x.dev != nil {
		deviceInPlace("Axpy", dst, x, func(k *Kernels) bool { return k.Axpy != nil }, func(k *Kernels) { k.Axpy(dst, float32(alpha), x) })
		return
	}
	if dst.IsContiguous() && x.IsContiguous() && slices.Equal(dst.shape, x.shape) {
		n := dst.Numel()
		if dst.dtype == Float64 {
			axpySlice(dst.f64[dst.offset:dst.offset+n], alpha, x.f64[x.offset:x.offset+n])
		} else {
			axpySlice(dst.f32[dst.offset:dst.offset+n], float32(alpha), x.f32[x.offset:x.offset+n])
		}
		return
	}
	checkBroadcastTo("Axpy", x.shape, dst.shape)
	if x.isConstant() && dst.IsContiguous() {
		// One element broadcast (a scalar, or SumAll's expanded gradient).
		n := dst.Numel()
		if dst.dtype == Float64 {
			axpyScalar(dst.f64[dst.offset:dst.offset+n], alpha, x.f64[x.offset])
		} else {
			axpyScalar(dst.f32[dst.offset:dst.offset+n], float32(alpha), x.f32[x.offset])
		}
		return
	}
	if w, ok := rowBroadcast(dst, x); ok {
		d := dst.Numel()
		for r := 0; r < d; r += w {
			if dst.dtype == Float64 {
				axpySlice(dst.f64[dst.offset+r:dst.offset+r+w], alpha, x.f64[x.offset:x.offset+w])
			} else {
				axpySlice(dst.f32[dst.offset+r:dst.offset+r+w], float32(alpha), x.f32[x.offset:x.offset+w])
			}
		}
		return
	}
	if dst.dtype == Float64 {
		assignStrided(dst, dst.f64, x, x.f64, func(d, s float64) float64 { return d + alpha*s })
	} else {
		a := float32(alpha)
		assignStrided(dst, dst.f32, x, x.f32, func(d, s float32) float32 { return d + a*s })
	}
}

func axpySlice[T float](dst []T, alpha T, x []T) {
	x = x[:len(dst)]
	if alpha == 1 {
		binVV(opAdd, dst, dst, x)
		return
	}
	for i, v := range x {
		dst[i] += alpha * v
	}
}

// axpyScalar does dst[i] += alpha*v, element by element as axpySlice would
// with every x[i] == v.
func axpyScalar[T float](dst []T, alpha, v T) {
	if alpha == 1 {
		binVS(opAdd, dst, dst, v)
		return
	}
	for i := range dst {
		dst[i] += alpha * v
	}
}

// ScaleInto does t *= s in place.
func ScaleInto(t *Tensor, s float64) {
	if t.dev != nil {
		deviceInPlace("ScaleInto", t, nil, func(k *Kernels) bool { return k.Scale != nil }, func(k *Kernels) { k.Scale(t, t, float32(s)) })
		return
	}
	if t.IsContiguous() {
		n := t.Numel()
		if t.dtype == Float64 {
			scaleSlice(t.f64[t.offset:t.offset+n], s)
		} else {
			scaleSlice(t.f32[t.offset:t.offset+n], float32(s))
		}
		return
	}
	if t.dtype == Float64 {
		assignStrided(t, t.f64, t, t.f64, func(d, _ float64) float64 { return d * s })
	} else {
		s32 := float32(s)
		assignStrided(t, t.f32, t, t.f32, func(d, _ float32) float32 { return d * s32 })
	}
}

func scaleSlice[T float](x []T, s T) {
	if s == 0 {
		clear(x)
		return
	}
	for i := range x {
		x[i] *= s
	}
}

// rowBroadcast reports whether src (already known to broadcast to dst) is a
// contiguous block repeated along dst's leading dimensions, as a bias is
// over a batch, and returns the block's length.
func rowBroadcast(dst, src *Tensor) (int, bool) {
	w := src.Numel()
	if !dst.IsContiguous() || !src.IsContiguous() || w == 0 || !isTrailing(src.shape, dst.shape) {
		return 0, false
	}
	return w, true
}

func copyRows[T float](dst, row []T) {
	for r := 0; r < len(dst); r += len(row) {
		copy(dst[r:r+len(row)], row)
	}
}

// checkBroadcastTo panics unless src broadcasts to exactly dst.
func checkBroadcastTo(op string, src, dst []int) {
	if len(src) > len(dst) {
		panic(fmt.Sprintf("tensor: %s: shape %s cannot be broadcast to %s", op, sh(src), sh(dst)))
	}
	off := len(dst) - len(src)
	for i, d := range src {
		if d != 1 && d != dst[off+i] {
			panic(fmt.Sprintf("tensor: %s: shape %s cannot be broadcast to %s", op, sh(src), sh(dst)))
		}
	}
}

// assignStrided sets every dst element to f(dst, src) with src broadcast to
// dst's shape; both may be strided views. It is the slow general path.
func assignStrided[T float](dst *Tensor, dd []T, src *Tensor, sd []T, f func(d, s T) T) {
	rank := len(dst.shape)
	if rank == 0 {
		dd[dst.offset] = f(dd[dst.offset], sd[src.offset])
		return
	}
	var bs, bd, bsrc, bi [maxStackDims]int
	sh := ints(&bs, rank)
	copy(sh, dst.shape)
	sdst := ints(&bd, rank)
	copy(sdst, dst.strides)
	ssrc := ints(&bsrc, rank)
	broadcastStrides(src, dst.shape, ssrc)
	n := dst.Numel()
	if n == 0 {
		return
	}
	rank = collapse(sh, sdst, ssrc)
	inner := sh[rank-1]
	id, is := sdst[rank-1], ssrc[rank-1]
	idx := ints(&bi, rank)
	od, os := dst.offset, src.offset
	for done := 0; done < n; done += inner {
		for j := 0; j < inner; j++ {
			p := od + j*id
			dd[p] = f(dd[p], sd[os+j*is])
		}
		for k := rank - 2; k >= 0; k-- {
			idx[k]++
			od += sdst[k]
			os += ssrc[k]
			if idx[k] < sh[k] {
				break
			}
			od -= sdst[k] * sh[k]
			os -= ssrc[k] * sh[k]
			idx[k] = 0
		}
	}
}
