package tensor

import "fmt"

// Forwards and gradients of autograd's Clamp, PowScalar, Pow, Max along an
// axis and BCEWithLogits, and the broadcast that spreads a reduction's
// gradient back: each runs the entries of its operands' device table, the
// host's included (cpu_pointwise_grad.go, cpu_reduce.go, cpu_index.go),
// so that autograd keeps tensors on the op's device and never reads them.

// ClampBackward is Clamp's gradient: gy where lo ≤ x ≤ hi (bounds
// included, as torch), else 0. With inPlace the gradient is written over
// gy, which the caller owns.
func ClampBackward(gy, x *Tensor, lo, hi float64, inPlace bool) *Tensor {
	k := table("Clamp backward", gy, x)
	need(k.ClampBackward != nil, "Clamp backward", gy)
	gy, x = gy.Contiguous(), x.Contiguous()
	dx := gradOut(gy, inPlace)
	k.ClampBackward(dx, gy, x, lo, hi)
	return dx
}

// PowScalarBackward is PowScalar's gradient gy·p·x**(p-1), written over gy
// with inPlace.
func PowScalarBackward(gy, x *Tensor, p float64, inPlace bool) *Tensor {
	k := table("PowScalar backward", gy, x)
	need(k.PowScalarBackward != nil, "PowScalar backward", gy)
	gy, x = gy.Contiguous(), x.Contiguous()
	dx := gradOut(gy, inPlace)
	k.PowScalarBackward(dx, gy, x, p)
	return dx
}

// gradOut is the tensor an elementwise backward writes: gy itself when
// the caller owns it (gy is contiguous here, so Contiguous returned it
// and the write lands in the caller's tensor), else a new one.
func gradOut(gy *Tensor, inPlace bool) *Tensor {
	if inPlace {
		return gy
	}
	return EmptyAs(gy, gy.shape...) // written whole
}

// PowBackward is the gradient of y = Pow(a, b) at y's shape (the caller
// reduces a broadcast operand's): ga = gy·b·a**(b-1) when wantA, and
// gb = gy·y·log(a), taken as 0 where a = 0 as torch, when wantB; the other
// is nil.
func PowBackward(gy, a, b, y *Tensor, wantA, wantB bool) (ga, gb *Tensor) {
	k := table("Pow backward", gy, a, b, y)
	need(k.PowBackward != nil, "Pow backward", gy)
	checkDType("Pow backward", gy, a)
	checkDType("Pow backward", gy, b)
	shape := y.shape
	gy = gy.Contiguous()
	if wantA {
		ga = EmptyAs(gy, shape...) // written whole
	}
	if wantB {
		gb = EmptyAs(gy, shape...)
	}
	if ga != nil || gb != nil {
		k.PowBackward(ga, gb, gy, ExpandContiguous(a, shape...), ExpandContiguous(b, shape...), y.Contiguous())
	}
	return ga, gb
}

// MaxDim returns the maximum of a along axis (kept as size 1 with
// keepDim) and, for MaxDimBackward, the position of each maximum along
// the axis: the first, NaN counting as the maximum, as torch.max(a, dim).
// arg is a tensor on a's device whose float32 elements hold int32 bits,
// whatever a's dtype: it is MaxDimBackward's operand, not for reading.
func MaxDim(a *Tensor, axis int, keepDim bool) (y, arg *Tensor) {
	k := table("Max", a)
	need(k.MaxDim != nil, "Max", a)
	if a.Dim() == 0 {
		panic("tensor: Max: needs at least one dimension, got a 0-d tensor")
	}
	ax := normAxis("Max", axis, a.Dim(), a.shape)
	outer, n, inner := split3(a.shape, ax, ax+1)
	if n == 0 {
		panic(fmt.Sprintf("tensor: Max: empty axis %d of shape %s", axis, sh(a.shape)))
	}
	x := a.Contiguous()
	y = EmptyAs(x, reducedShape(a.shape, []int{ax}, keepDim)...) // written whole
	arg = emptyFloat32As(x, outer*inner)
	k.MaxDim(y, arg, x, outer, n, inner)
	return y, arg
}

// MaxDimBackward is MaxDim's gradient: a tensor of shape holding gy at the
// positions arg names along axis, 0 elsewhere.
func MaxDimBackward(gy, arg *Tensor, shape []int, axis int) *Tensor {
	k := table("Max backward", gy, arg)
	need(k.MaxDimBackward != nil, "Max backward", gy)
	ax := normAxis("Max backward", axis, len(shape), shape)
	outer, n, inner := split3(shape, ax, ax+1)
	if gy.Numel() != outer*inner || arg.Numel() != outer*inner {
		panic(fmt.Sprintf("tensor: Max backward: gradient %s and %d positions for shape %s axis %d", sh(gy.shape), arg.Numel(), sh(shape), axis))
	}
	dx := EmptyAs(gy, shape...) // written whole
	k.MaxDimBackward(dx, gy.Contiguous(), arg, outer, n, inner)
	return dx
}

// emptyFloat32As is EmptyAs for a float32 tensor whatever like's dtype
// (index tensors, float32 on every device).
func emptyFloat32As(like *Tensor, shape ...int) *Tensor {
	if like.dev == nil {
		return newFull(Float32, shape...)
	}
	return MustEmptyOn(like.Device(), shape...)
}

// BCEWithLogits is the binary cross-entropy of sigmoid(x) against t in
// torch's stable form max(x, 0) - x·t + log(1 + e^-|x|), x and t of one
// shape: elementwise (x's shape), or with reduce summed and divided by div
// into a 0-d tensor (div 1 for a sum, the element count for a mean).
func BCEWithLogits(x, t *Tensor, reduce bool, div float64) *Tensor {
	k := table("BCEWithLogits", x, t)
	need(k.BCEWithLogits != nil, "BCEWithLogits", x)
	checkDType("BCEWithLogits", x, t)
	if !equalInts(x.shape, t.shape) {
		panic(fmt.Sprintf("tensor: BCEWithLogits: logits shape %s does not match target shape %s", sh(x.shape), sh(t.shape)))
	}
	x, t = x.Contiguous(), t.Contiguous()
	var y *Tensor
	if reduce {
		y = EmptyAs(x) // written whole
	} else {
		y = EmptyAs(x, x.shape...)
	}
	k.BCEWithLogits(y, x, t, reduce, div)
	return y
}

// BCEWithLogitsBackward is BCEWithLogits' gradient: for the logits
// (σ(x) - t)·g when wantX, for the targets -x·g when wantT (else nil), g
// being gy elementwise, or with reduced gy's one element divided by div.
func BCEWithLogitsBackward(gy, x, t *Tensor, reduced bool, div float64, wantX, wantT bool) (gx, gt *Tensor) {
	k := table("BCEWithLogits backward", gy, x, t)
	need(k.BCEWithLogitsBackward != nil, "BCEWithLogits backward", gy)
	if reduced && gy.Numel() != 1 || !reduced && gy.Numel() != x.Numel() {
		panic(fmt.Sprintf("tensor: BCEWithLogits backward: gradient %s for logits %s", sh(gy.shape), sh(x.shape)))
	}
	if wantX {
		gx = EmptyAs(x, x.shape...) // written whole
	}
	if wantT {
		gt = EmptyAs(x, x.shape...)
	}
	if gx != nil || gt != nil {
		k.BCEWithLogitsBackward(gx, gt, gy.Contiguous(), x.Contiguous(), t.Contiguous(), reduced, div)
	}
	return gx, gt
}

// ExpandContiguous is Expand(t, shape...).Contiguous() in one StridedCopy
// of t's device: a contiguous tensor of shape holding t broadcast to it (a
// reduction's gradient spread back over its input). A t already of shape
// is returned contiguous, not copied.
func ExpandContiguous(t *Tensor, shape ...int) *Tensor {
	if equalInts(t.shape, shape) {
		return t.Contiguous()
	}
	k := table("Expand", t)
	need(k.StridedCopy != nil, "Expand", t)
	v := Expand(t, shape...)
	out := EmptyAs(t, shape...) // written whole
	k.StridedCopy(out, v)
	return out
}
