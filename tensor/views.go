package tensor

import (
	"fmt"
	"slices"
)

// view returns a tensor sharing t's storage with the given layout.
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	v := newHeader(t.dtype, len(shape))
	copy(v.shape, shape)
	copy(v.strides, strides)
	v.f32, v.f64, v.offset = t.f32, t.f64, offset
	return v
}

// Transpose returns a view with dimensions d0 and d1 swapped.
func Transpose(t *Tensor, d0, d1 int) *Tensor {
	r := t.Dim()
	d0 = normAxis("Transpose", d0, r, t.shape)
	d1 = normAxis("Transpose", d1, r, t.shape)
	shape, strides := cloneInts(t.shape), cloneInts(t.strides)
	shape[d0], shape[d1] = shape[d1], shape[d0]
	strides[d0], strides[d1] = strides[d1], strides[d0]
	return t.view(shape, strides, t.offset)
}

// T returns the transpose of a 2-D tensor as a view.
func (t *Tensor) T() *Tensor {
	if t.Dim() != 2 {
		panic(fmt.Sprintf("tensor: T: want a 2-D tensor, got shape %v", t.shape))
	}
	return Transpose(t, 0, 1)
}

// Permute returns a view whose dimension i is t's dimension dims[i].
func Permute(t *Tensor, dims ...int) *Tensor {
	r := t.Dim()
	if len(dims) != r {
		panic(fmt.Sprintf("tensor: Permute: %d dims %v for shape %v", len(dims), dims, t.shape))
	}
	seen := make([]bool, r)
	shape, strides := make([]int, r), make([]int, r)
	for i, d := range dims {
		d = normAxis("Permute", d, r, t.shape)
		if seen[d] {
			panic(fmt.Sprintf("tensor: Permute: repeated dim in %v for shape %v", dims, t.shape))
		}
		seen[d] = true
		shape[i], strides[i] = t.shape[d], t.strides[d]
	}
	return t.view(shape, strides, t.offset)
}

// Narrow returns the view t[..., start:start+length, ...] along axis.
func Narrow(t *Tensor, axis, start, length int) *Tensor {
	axis = normAxis("Narrow", axis, t.Dim(), t.shape)
	if start < 0 || length < 0 || start+length > t.shape[axis] {
		panic(fmt.Sprintf("tensor: Narrow: [%d, %d) out of range for axis %d of shape %v", start, start+length, axis, t.shape))
	}
	shape := cloneInts(t.shape)
	shape[axis] = length
	return t.view(shape, cloneInts(t.strides), t.offset+start*t.strides[axis])
}

// Unsqueeze returns a view with a size-1 dimension inserted at axis
// (0 <= axis <= Dim(), negative counts from the end as torch does).
func Unsqueeze(t *Tensor, axis int) *Tensor {
	axis = normAxis("Unsqueeze", axis, t.Dim()+1, t.shape)
	st := 1
	if axis < t.Dim() {
		st = t.strides[axis] * t.shape[axis]
	}
	shape := slices.Insert(cloneInts(t.shape), axis, 1)
	strides := slices.Insert(cloneInts(t.strides), axis, st)
	return t.view(shape, strides, t.offset)
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
			panic(fmt.Sprintf("tensor: Squeeze: axis %d has size %d in shape %v", a, t.shape[a2], t.shape))
		}
		drop[a2] = true
	}
	shape, strides := []int{}, []int{}
	for i := range t.shape {
		if !drop[i] {
			shape = append(shape, t.shape[i])
			strides = append(strides, t.strides[i])
		}
	}
	return t.view(shape, strides, t.offset)
}

// Expand returns a read-only broadcast view of t at shape (size-1 dimensions
// get stride 0, as torch.expand). Writing through it aliases elements.
func Expand(t *Tensor, shape ...int) *Tensor {
	checkBroadcastTo("Expand", t.shape, shape)
	strides := make([]int, len(shape))
	broadcastStrides(t, shape, strides)
	return t.view(cloneInts(shape), strides, t.offset)
}
