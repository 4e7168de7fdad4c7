package tensor

import "fmt"

// DType is the element type of a Tensor.
type DType uint8

const (
	Float32 DType = iota // first-class training dtype
	Float64              // used for gradient checks
	// Int64 holds labels, token ids, indices and counters (torch.long):
	// tensors of it are made, viewed, copied, saved and loaded, and the ops
	// that take indices accept them; arithmetic ops take float tensors.
	// Int64 tensors live on the host (devices hold float32).
	Int64
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the width of one element in bytes.
func (d DType) Size() int {
	if d == Float64 || d == Int64 {
		return 8
	}
	return 4
}

// Tensor is an n-dimensional strided array. Its storage is a flat slice
// (tensor/gorgoniatensor wraps it as a gorgonia *Dense without copying);
// views (Reshape, Transpose, Narrow) share that storage and carry their own
// shape, strides and offset.
//
// Tensors are not safe for concurrent mutation.
type Tensor struct {
	f32     []float32 // storage for Float32 tensors
	f64     []float64 // storage for Float64 tensors
	i64     []int64   // storage for Int64 tensors
	dtype   DType
	shape   []int
	strides []int
	offset  int
	// dev is the device memory of a tensor on a device (device.go); nil on
	// the host, where f32 or f64 hold the elements.
	dev *devRef
	// blk is the host cache block holding f32 or f64 (alloc.go), shared by
	// views; nil for storage the cache did not make.
	blk *hostBlock
	// dims backs shape and strides for tensors of rank <= inlineDims, so a
	// new tensor is two allocations: this struct and its data.
	dims [2 * inlineDims]int
}

// inlineDims is the rank up to which shape and strides live in the struct.
const inlineDims = 4

// newHeader returns a tensor header of the given rank whose shape and
// strides are set by the caller.
func newHeader(dt DType, rank int) *Tensor {
	t := &Tensor{dtype: dt}
	t.initDims(rank)
	return t
}

// initDims points t's shape and strides at storage for rank dimensions:
// the inline dims when they fit, else a new slice.
func (t *Tensor) initDims(rank int) {
	if rank <= inlineDims {
		t.shape = t.dims[:rank:rank]
		t.strides = t.dims[inlineDims : inlineDims+rank : inlineDims+rank]
	} else {
		b := make([]int, 2*rank)
		t.shape, t.strides = b[:rank:rank], b[rank:]
	}
}

// setRowMajor sets t's shape to shape with C-order strides.
func (t *Tensor) setRowMajor(shape []int) {
	copy(t.shape, shape)
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		t.strides[i] = s
		s *= shape[i]
	}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative dimension in shape %s", sh(shape)))
		}
		n *= d
	}
	return n
}

func cloneInts(s []int) []int { return append([]int{}, s...) }

// fromBacking wraps data (which must be []float32 or []float64) without copying.
// FromF32 wraps data as a float32 tensor of the given shape without copying.
func FromF32(data []float32, shape ...int) *Tensor {
	if n := numel(shape); len(data) != n {
		panic(fmt.Sprintf("tensor: data length %d does not match shape %s (%d elements)", len(data), sh(shape), n))
	}
	t := newHeader(Float32, len(shape))
	t.setRowMajor(shape)
	t.f32 = data
	return t
}

// FromF64 wraps data as a float64 tensor of the given shape without copying.
func FromF64(data []float64, shape ...int) *Tensor {
	if n := numel(shape); len(data) != n {
		panic(fmt.Sprintf("tensor: data length %d does not match shape %s (%d elements)", len(data), sh(shape), n))
	}
	t := newHeader(Float64, len(shape))
	t.setRowMajor(shape)
	t.f64 = data
	return t
}

// FromI64 wraps data as an int64 tensor of the given shape without copying.
func FromI64(data []int64, shape ...int) *Tensor {
	if n := numel(shape); len(data) != n {
		panic(fmt.Sprintf("tensor: data length %d does not match shape %s (%d elements)", len(data), sh(shape), n))
	}
	t := newHeader(Int64, len(shape))
	t.setRowMajor(shape)
	t.i64 = data
	return t
}

// FromInts copies ints into a new int64 tensor of the given shape (labels
// or token ids held as []int).
func FromInts(data []int, shape ...int) *Tensor {
	out := make([]int64, len(data))
	for i, v := range data {
		out[i] = int64(v)
	}
	return FromI64(out, shape...)
}

// New returns a zero-filled tensor.
func New(dt DType, shape ...int) *Tensor { return newStorage(dt, true, shape...) }

// Empty returns a host tensor whose elements are not initialized, as
// torch.empty: they hold whatever the host cache's block last held. The
// caller must write every element before any is read; ops whose output
// they overwrite whole use it, since zeroing a large tensor costs about as
// much as writing it.
func Empty(dt DType, shape ...int) *Tensor { return newFull(dt, shape...) }

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

// isConstant reports whether every element of t is one storage element: a
// tensor of at most one element, or a broadcast of one (Expand of a scalar),
// whose strides are 0 along every dimension longer than 1. An empty tensor
// is not constant (it has no element to read).
func (t *Tensor) isConstant() bool {
	if t.dev != nil || numel(t.shape) == 0 {
		return false
	}
	for i, d := range t.shape {
		if d > 1 && t.strides[i] != 0 {
			return false
		}
	}
	return true
}

// F32 returns the tensor's elements as a float32 slice that aliases its
// storage. It panics if the tensor is not float32 or not contiguous
// (call Contiguous first).
func (t *Tensor) F32() []float32 {
	if t.dev != nil {
		panic(t.deviceHostAccess("F32"))
	}
	t.checkLive("F32")
	if t.dtype != Float32 {
		panic(fmt.Sprintf("tensor: F32 on a %v tensor", t.dtype))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: F32 on a non-contiguous view (shape %s, strides %s); call Contiguous", sh(t.shape), sh(t.strides)))
	}
	return t.f32[t.offset : t.offset+t.Numel() : t.offset+t.Numel()]
}

// F64 is F32 for float64 tensors.
func (t *Tensor) F64() []float64 {
	if t.dev != nil {
		panic(t.deviceHostAccess("F64"))
	}
	t.checkLive("F64")
	if t.dtype != Float64 {
		panic(fmt.Sprintf("tensor: F64 on a %v tensor", t.dtype))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: F64 on a non-contiguous view (shape %s, strides %s); call Contiguous", sh(t.shape), sh(t.strides)))
	}
	return t.f64[t.offset : t.offset+t.Numel() : t.offset+t.Numel()]
}

// I64 is F32 for int64 tensors.
func (t *Tensor) I64() []int64 {
	if t.dev != nil {
		panic(t.deviceHostAccess("I64"))
	}
	t.checkLive("I64")
	if t.dtype != Int64 {
		panic(fmt.Sprintf("tensor: I64 on a %v tensor", t.dtype))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: I64 on a non-contiguous view (shape %s, strides %s); call Contiguous", sh(t.shape), sh(t.strides)))
	}
	return t.i64[t.offset : t.offset+t.Numel() : t.offset+t.Numel()]
}

// Ints returns an int64 tensor's elements as ints, in C order (labels and
// indices for the ops that take []int).
func (t *Tensor) Ints() []int {
	src := t.Contiguous().I64()
	out := make([]int, len(src))
	for i, v := range src {
		out[i] = int(v)
	}
	return out
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
	if t.dev != nil {
		return t.deviceContiguous()
	}
	out := newFull(t.dtype, t.shape...) // both loops below write every element
	n := t.Numel()
	if t.isConstant() {
		// A broadcast of one element (SumAll's gradient): a fill.
		switch t.dtype {
		case Float64:
			splat(out.f64, t.f64[t.offset])
		case Int64:
			splat(out.i64, t.i64[t.offset])
		default:
			splat(out.f32, t.f32[t.offset])
		}
		return out
	}
	idx := make([]int, len(t.shape))
	for k := 0; k < n; k++ {
		src := t.at(idx)
		switch t.dtype {
		case Float64:
			out.f64[k] = t.f64[src]
		case Int64:
			out.i64[k] = t.i64[src]
		default:
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

// splat sets every element of d to v, bit for bit (fillSlice clears for
// v == 0, which would turn -0 into +0).
func splat[T hostElem](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

// Clone returns a contiguous deep copy.
func (t *Tensor) Clone() *Tensor {
	c := t.Contiguous()
	if c != t {
		return c
	}
	if t.dev != nil {
		return t.deviceClone()
	}
	switch t.dtype {
	case Float64:
		return FromF64(append([]float64(nil), t.F64()...), t.shape...)
	case Int64:
		return FromI64(append([]int64(nil), t.I64()...), t.shape...)
	}
	return FromF32(append([]float32(nil), t.F32()...), t.shape...)
}

// Reshape returns a view with a new shape sharing storage. One dimension may
// be -1. A non-contiguous tensor is copied first.
func (t *Tensor) Reshape(dims ...int) *Tensor {
	var buf [maxStackDims]int
	shape := ints(&buf, len(dims))
	copy(shape, dims)
	infer, known := -1, 1
	for i, d := range shape {
		if d == -1 {
			if infer >= 0 {
				panic(fmt.Sprintf("tensor: reshape %s -> %s: more than one -1", sh(t.shape), sh(shape)))
			}
			infer = i
			continue
		}
		known *= d
	}
	n := t.Numel()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("tensor: reshape %s -> %s: cannot infer dimension", sh(t.shape), sh(shape)))
		}
		shape[infer] = n / known
	}
	if numel(shape) != n {
		panic(fmt.Sprintf("tensor: reshape %s -> %s: element count %d != %d", sh(t.shape), sh(shape), n, numel(shape)))
	}
	c := t.Contiguous()
	v := newHeader(c.dtype, len(shape))
	v.setRowMajor(shape)
	v.f32, v.f64, v.i64, v.offset, v.blk = c.f32, c.f64, c.i64, c.offset, c.blk
	if c.dev != nil { // no write barrier for host tensors
		v.dev = c.dev
	}
	return v
}

// Item returns the single element of a one-element tensor as float64.
func (t *Tensor) Item() float64 {
	if t.Numel() != 1 {
		panic(fmt.Sprintf("tensor: Item on a tensor of shape %s", sh(t.shape)))
	}
	if t.dev != nil {
		return t.deviceItem()
	}
	t.checkLive("Item")
	switch t.dtype {
	case Float64:
		return t.f64[t.offset]
	case Int64:
		return float64(t.i64[t.offset])
	}
	return float64(t.f32[t.offset])
}

func (t *Tensor) String() string {
	return fmt.Sprintf("Tensor(%v, %v)", t.dtype, t.shape)
}

// At returns the element at the given multi-index as float64 (negative
// indices are not allowed). It is meant for tests and debugging, not loops.
func (t *Tensor) At(idx ...int) float64 {
	p := t.checkedAt("At", idx)
	switch t.dtype {
	case Float64:
		return t.f64[p]
	case Int64:
		return float64(t.i64[p])
	}
	return float64(t.f32[p])
}

// Set stores v at the given multi-index.
func (t *Tensor) Set(v float64, idx ...int) {
	p := t.checkedAt("Set", idx)
	switch t.dtype {
	case Float64:
		t.f64[p] = v
	case Int64:
		t.i64[p] = int64(v)
	default:
		t.f32[p] = float32(v)
	}
}

func (t *Tensor) checkedAt(op string, idx []int) int {
	if t.dev != nil {
		panic(t.deviceHostAccess(op))
	}
	t.checkLive(op)
	if len(idx) != len(t.shape) {
		panic(fmt.Sprintf("tensor: %s: %d indices for shape %s", op, len(idx), sh(t.shape)))
	}
	for i, v := range idx {
		if v < 0 || v >= t.shape[i] {
			panic(fmt.Sprintf("tensor: %s: index %s out of range for shape %s", op, sh(idx), sh(t.shape)))
		}
	}
	return t.at(idx)
}
