package tensor

import "fmt"

// view returns a header of the given rank sharing t's storage at offset;
// the caller fills in its shape and strides.
func (t *Tensor) view(rank, offset int) *Tensor {
	v := newHeader(t.dtype, rank)
	v.f32, v.f64, v.i64, v.offset, v.blk = t.f32, t.f64, t.i64, offset, t.blk
	if t.dev != nil { // no write barrier for host tensors
		v.dev = t.dev
	}
	return v
}

// Transpose returns a view with dimensions d0 and d1 swapped.
func Transpose(t *Tensor, d0, d1 int) *Tensor {
	r := t.Dim()
	d0 = normAxis("Transpose", d0, r, t.shape)
	d1 = normAxis("Transpose", d1, r, t.shape)
	v := t.view(r, t.offset)
	copy(v.shape, t.shape)
	copy(v.strides, t.strides)
	v.shape[d0], v.shape[d1] = v.shape[d1], v.shape[d0]
	v.strides[d0], v.strides[d1] = v.strides[d1], v.strides[d0]
	return v
}

// T returns the transpose of a 2-D tensor as a view.
func (t *Tensor) T() *Tensor {
	if t.Dim() != 2 {
		panic(fmt.Sprintf("tensor: T: want a 2-D tensor, got shape %s", sh(t.shape)))
	}
	return Transpose(t, 0, 1)
}

// Permute returns a view whose dimension i is t's dimension dims[i].
func Permute(t *Tensor, dims ...int) *Tensor {
	r := t.Dim()
	if len(dims) != r {
		panic(fmt.Sprintf("tensor: Permute: %d dims %s for shape %s", len(dims), sh(dims), sh(t.shape)))
	}
	seen := make([]bool, r)
	v := t.view(r, t.offset)
	for i, d := range dims {
		d = normAxis("Permute", d, r, t.shape)
		if seen[d] {
			panic(fmt.Sprintf("tensor: Permute: repeated dim in %s for shape %s", sh(dims), sh(t.shape)))
		}
		seen[d] = true
		v.shape[i], v.strides[i] = t.shape[d], t.strides[d]
	}
	return v
}

// Narrow returns the view t[..., start:start+length, ...] along axis.
func Narrow(t *Tensor, axis, start, length int) *Tensor {
	axis = normAxis("Narrow", axis, t.Dim(), t.shape)
	if start < 0 || length < 0 || start+length > t.shape[axis] {
		panic(fmt.Sprintf("tensor: Narrow: [%d, %d) out of range for axis %d of shape %s", start, start+length, axis, sh(t.shape)))
	}
	v := t.view(t.Dim(), t.offset+start*t.strides[axis])
	copy(v.shape, t.shape)
	copy(v.strides, t.strides)
	v.shape[axis] = length
	return v
}

// Unsqueeze returns a view with a size-1 dimension inserted at axis
// (0 <= axis <= Dim(), negative counts from the end as torch does).
func Unsqueeze(t *Tensor, axis int) *Tensor {
	axis = normAxis("Unsqueeze", axis, t.Dim()+1, t.shape)
	st := 1
	if axis < t.Dim() {
		st = t.strides[axis] * t.shape[axis]
	}
	v := t.view(t.Dim()+1, t.offset)
	copy(v.shape, t.shape[:axis])
	copy(v.strides, t.strides[:axis])
	v.shape[axis], v.strides[axis] = 1, st
	copy(v.shape[axis+1:], t.shape[axis:])
	copy(v.strides[axis+1:], t.strides[axis:])
	return v
}

// Squeeze returns a view without the given size-1 axes; with no axes it
// drops every size-1 dimension. Naming an axis whose size is not 1 panics.
func Squeeze(t *Tensor, axes ...int) *Tensor {
	drop := make([]bool, t.Dim())
	if len(axes) == 0 {
		for i, d := range t.shape {
			drop[i] = d == 1
		}
	}
	for _, a := range axes {
		a2 := normAxis("Squeeze", a, t.Dim(), t.shape)
		if t.shape[a2] != 1 {
			panic(fmt.Sprintf("tensor: Squeeze: axis %d has size %d in shape %s", a, t.shape[a2], sh(t.shape)))
		}
		drop[a2] = true
	}
	rank := 0
	for _, d := range drop {
		if !d {
			rank++
		}
	}
	v := t.view(rank, t.offset)
	j := 0
	for i := range t.shape {
		if !drop[i] {
			v.shape[j], v.strides[j] = t.shape[i], t.strides[i]
			j++
		}
	}
	return v
}

// Expand returns a read-only broadcast view of t at shape (size-1 dimensions
// get stride 0, as torch.expand). Writing through it aliases elements.
func Expand(t *Tensor, shape ...int) *Tensor {
	checkBroadcastTo("Expand", t.shape, shape)
	v := t.view(len(shape), t.offset)
	copy(v.shape, shape)
	broadcastStrides(t, shape, v.strides)
	return v
}
