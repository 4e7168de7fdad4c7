package data

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Array is an n-dimensional array read from an IDX or .npy file, kept in its
// file's element type. Data is one of []uint8, []int8, []int16, []int32,
// []int64, []float32 or []float64, in C (row-major) order, with
// Len() == product of Shape (1 for a scalar, whose Shape is empty).
type Array struct {
	Shape []int
	Data  any
}

// Len is the number of elements.
func (a *Array) Len() int {
	switch d := a.Data.(type) {
	case []uint8:
		return len(d)
	case []int8:
		return len(d)
	case []int16:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	}
	return 0
}

// DType names the element type as numpy does ("uint8", "float32", ...).
func (a *Array) DType() string {
	switch a.Data.(type) {
	case []uint8:
		return "uint8"
	case []int8:
		return "int8"
	case []int16:
		return "int16"
	case []int32:
		return "int32"
	case []int64:
		return "int64"
	case []float32:
		return "float32"
	case []float64:
		return "float64"
	}
	return fmt.Sprintf("%T", a.Data)
}

func convert[S, D int8 | uint8 | int16 | int32 | int64 | float32 | float64 | int](src []S) []D {
	out := make([]D, len(src))
	for i, v := range src {
		out[i] = D(v)
	}
	return out
}

// Float32 returns the elements as float32 (the slice itself when the array is
// float32, otherwise a converted copy).
func (a *Array) Float32() []float32 {
	switch d := a.Data.(type) {
	case []float32:
		return d
	case []uint8:
		return convert[uint8, float32](d)
	case []int8:
		return convert[int8, float32](d)
	case []int16:
		return convert[int16, float32](d)
	case []int32:
		return convert[int32, float32](d)
	case []int64:
		return convert[int64, float32](d)
	case []float64:
		return convert[float64, float32](d)
	}
	return nil
}

// Float64 is Float32 for float64.
func (a *Array) Float64() []float64 {
	switch d := a.Data.(type) {
	case []float64:
		return d
	case []uint8:
		return convert[uint8, float64](d)
	case []int8:
		return convert[int8, float64](d)
	case []int16:
		return convert[int16, float64](d)
	case []int32:
		return convert[int32, float64](d)
	case []int64:
		return convert[int64, float64](d)
	case []float32:
		return convert[float32, float64](d)
	}
	return nil
}

// Ints returns the elements as ints, for class labels. Floating-point values
// are truncated toward zero.
func (a *Array) Ints() []int {
	switch d := a.Data.(type) {
	case []uint8:
		return convert[uint8, int](d)
	case []int8:
		return convert[int8, int](d)
	case []int16:
		return convert[int16, int](d)
	case []int32:
		return convert[int32, int](d)
	case []int64:
		return convert[int64, int](d)
	case []float32:
		return convert[float32, int](d)
	case []float64:
		return convert[float64, int](d)
	}
	return nil
}

// Tensor returns the array as a tensor of dtype dt with the array's shape
// (a scalar becomes shape [1]). It shares memory when the element types
// match.
func (a *Array) Tensor(dt tensor.DType) *tensor.Tensor {
	shape := a.Shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	if dt == tensor.Float64 {
		return tensor.FromF64(a.Float64(), shape...)
	}
	return tensor.FromF32(a.Float32(), shape...)
}

// checkedElems returns the product of dims, or false if it exceeds limit
// (so that a hostile header cannot make us allocate more than the input holds).
func checkedElems(dims []int, limit int) (int, bool) {
	zero := false
	for _, d := range dims { // every dim, before a zero ends the product: [0, -1] must fail
		if d < 0 {
			return 0, false
		}
		zero = zero || d == 0
	}
	if zero {
		return 0, true
	}
	n := 1
	for _, d := range dims {
		if n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= limit
}
