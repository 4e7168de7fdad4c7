package tensor

import (
	"fmt"

	gt "gorgonia.org/tensor"
)

// DType is the element type of a Tensor.
type DType uint8

const (
	Float32 DType = iota // first-class training dtype
	Float64              // used for gradient checks
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the width of one element in bytes.
func (d DType) Size() int {
	if d == Float64 {
		return 8
	}
	return 4
}

// Tensor is an n-dimensional strided array. Its storage is a flat, contiguous
// gorgonia.org/tensor *Dense; views (Reshape, Transpose, Narrow) share that
// storage and carry their own shape, strides and offset.
//
// Tensors are not safe for concurrent mutation.
type Tensor struct {
	dense   *gt.Dense // owner of the storage, always 1-D and contiguous
	f32     []float32 // dense's backing, cached for fast typed access
	f64     []float64
	dtype   DType
	shape   []int
	strides []int
	offset  int
}

// rowMajorStrides returns C-order strides for shape.
func rowMajorStrides(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative dimension in shape %v", shape))
		}
		n *= d
	}
	return n
}

func cloneInts(s []int) []int { return append([]int(nil), s...) }

// fromBacking wraps data (which must be []float32 or []float64) without copying.
func fromBacking(data any, shape []int) *Tensor {
	t := &Tensor{shape: cloneInts(shape), strides: rowMajorStrides(shape)}
	n := numel(shape)
	switch d := data.(type) {
	case []float32:
		if len(d) != n {
			panic(fmt.Sprintf("tensor: data length %d does not match shape %v (%d elements)", len(d), shape, n))
		}
		t.dtype, t.f32 = Float32, d
	case []float64:
		if len(d) != n {
			panic(fmt.Sprintf("tensor: data length %d does not match shape %v (%d elements)", len(d), shape, n))
		}
		t.dtype, t.f64 = Float64, d
	default:
		panic(fmt.Sprintf("tensor: unsupported backing type %T", data))
	}
	t.dense = gt.New(gt.WithShape(n), gt.WithBacking(data))
	return t
}

// FromF32 wraps data as a float32 tensor of the given shape without copying.
func FromF32(data []float32, shape ...int) *Tensor { return fromBacking(data, shape) }

// FromF64 wraps data as a float64 tensor of the given shape without copying.
func FromF64(data []float64, shape ...int) *Tensor { return fromBacking(data, shape) }

// FromDense copies a gorgonia dense tensor (float32 or float64) into a new Tensor.
func FromDense(d *gt.Dense) (*Tensor, error) {
	src := d
	if d.IsMaterializable() {
		m, ok := d.Materialize().(*gt.Dense)
		if !ok {
			return nil, fmt.Errorf("tensor: materialize dense view of shape %v: got %T", d.Shape(), d.Materialize())
		}
		src = m
	}
	shape := cloneInts(src.Shape())
	if src.IsScalar() {
		shape = nil
	}
	switch data := src.Data().(type) {
	case []float32:
		return FromF32(append([]float32(nil), data...), shape...), nil
	case []float64:
		return FromF64(append([]float64(nil), data...), shape...), nil
	case float32:
		return FromF32([]float32{data}), nil
	case float64:
		return FromF64([]float64{data}), nil
	}
	return nil, fmt.Errorf("tensor: unsupported dense dtype %v", src.Dtype())
}

// New returns a zero-filled tensor.
func New(dt DType, shape ...int) *Tensor {
	n := numel(shape)
	if dt == Float64 {
		return fromBacking(make([]float64, n), shape)
	}
	return fromBacking(make([]float32, n), shape)
}

// Zeros is New.
func Zeros(dt DType, shape ...int) *Tensor { return New(dt, shape...) }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns the shape. The caller must not modify it.
func (t *Tensor) Shape() []int { return t.shape }

// Strides returns the element strides. The caller must not modify them.
func (t *Tensor) Strides() []int { return t.strides }

// Dim returns the number of dimensions.
func (t *Tensor) Dim() int { return len(t.shape) }

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return numel(t.shape) }

// Size returns the extent of dimension i (negative counts from the end).
func (t *Tensor) Size(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// IsContiguous reports whether the tensor's elements are laid out in C order
// with no gaps.
func (t *Tensor) IsContiguous() bool {
	s := 1
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] != 1 && t.strides[i] != s {
			return false
		}
		s *= t.shape[i]
	}
	return true
}

// F32 returns the tensor's elements as a float32 slice that aliases its
// storage. It panics if the tensor is not float32 or not contiguous
// (call Contiguous first).
func (t *Tensor) F32() []float32 {
	if t.dtype != Float32 {
		panic(fmt.Sprintf("tensor: F32 on a %v tensor", t.dtype))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: F32 on a non-contiguous view (shape %v, strides %v); call Contiguous", t.shape, t.strides))
	}
	return t.f32[t.offset : t.offset+t.Numel() : t.offset+t.Numel()]
}

// F64 is F32 for float64 tensors.
func (t *Tensor) F64() []float64 {
	if t.dtype != Float64 {
		panic(fmt.Sprintf("tensor: F64 on a %v tensor", t.dtype))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: F64 on a non-contiguous view (shape %v, strides %v); call Contiguous", t.shape, t.strides))
	}
	return t.f64[t.offset : t.offset+t.Numel() : t.offset+t.Numel()]
}

// Dense returns a gorgonia *Dense holding this tensor's elements with its
// shape. For a contiguous tensor it aliases the storage; otherwise it is a copy.
func (t *Tensor) Dense() *gt.Dense {
	c := t.Contiguous()
	shape := cloneInts(c.shape)
	if len(shape) == 0 {
		shape = []int{1}
	}
	if c.dtype == Float64 {
		return gt.New(gt.WithShape(shape...), gt.WithBacking(c.F64()))
	}
	return gt.New(gt.WithShape(shape...), gt.WithBacking(c.F32()))
}

// at returns the flat storage index of the element at multi-index idx.
func (t *Tensor) at(idx []int) int {
	o := t.offset
	for i, v := range idx {
		o += v * t.strides[i]
	}
	return o
}

// Contiguous returns t if it is contiguous, otherwise a contiguous copy.
func (t *Tensor) Contiguous() *Tensor {
	if t.IsContiguous() {
		return t
	}
	out := New(t.dtype, t.shape...)
	n := t.Numel()
	idx := make([]int, len(t.shape))
	for k := 0; k < n; k++ {
		src := t.at(idx)
		if t.dtype == Float64 {
			out.f64[k] = t.f64[src]
		} else {
			out.f32[k] = t.f32[src]
		}
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < t.shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// Clone returns a contiguous deep copy.
func (t *Tensor) Clone() *Tensor {
	c := t.Contiguous()
	if c != t {
		return c
	}
	if t.dtype == Float64 {
		return FromF64(append([]float64(nil), t.F64()...), t.shape...)
	}
	return FromF32(append([]float32(nil), t.F32()...), t.shape...)
}

// Reshape returns a view with a new shape sharing storage. One dimension may
// be -1. A non-contiguous tensor is copied first.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	shape = cloneInts(shape)
	infer, known := -1, 1
	for i, d := range shape {
		if d == -1 {
			if infer >= 0 {
				panic(fmt.Sprintf("tensor: reshape %v -> %v: more than one -1", t.shape, shape))
			}
			infer = i
			continue
		}
		known *= d
	}
	n := t.Numel()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("tensor: reshape %v -> %v: cannot infer dimension", t.shape, shape))
		}
		shape[infer] = n / known
	}
	if numel(shape) != n {
		panic(fmt.Sprintf("tensor: reshape %v -> %v: element count %d != %d", t.shape, shape, n, numel(shape)))
	}
	c := t.Contiguous()
	return &Tensor{dense: c.dense, f32: c.f32, f64: c.f64, dtype: c.dtype,
		shape: shape, strides: rowMajorStrides(shape), offset: c.offset}
}

// Item returns the single element of a one-element tensor as float64.
func (t *Tensor) Item() float64 {
	if t.Numel() != 1 {
		panic(fmt.Sprintf("tensor: Item on a tensor of shape %v", t.shape))
	}
	if t.dtype == Float64 {
		return t.f64[t.offset]
	}
	return float64(t.f32[t.offset])
}

func (t *Tensor) String() string {
	return fmt.Sprintf("Tensor(%v, %v)", t.dtype, t.shape)
}
