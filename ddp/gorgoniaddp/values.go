//go:build !cuda

package gorgoniaddp

import (
	"fmt"
	"unsafe"

	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/tensor"
)

// alias returns a goddp tensor sharing v's memory: a *tensor.Dense
// (float32 or float64, contiguous) or a gorgonia scalar (*F32, *F64, 0-d).
func alias(v G.Value) (*tensor.Tensor, error) {
	switch x := v.(type) {
	case *gt.Dense:
		if !x.IsNativelyAccessible() || x.RequiresIterator() {
			return nil, fmt.Errorf("a %v tensor that is not contiguous host memory", x.Shape())
		}
		shape := []int(x.Shape())
		if x.IsScalar() {
			shape = nil
		}
		// Float32s/Float64s give the backing slice even for a 0-d Dense,
		// whose Data() is a copy of its element.
		switch x.Dtype() {
		case gt.Float32:
			return tensor.FromF32(x.Float32s()[:x.Size()], shape...), nil
		case gt.Float64:
			return tensor.FromF64(x.Float64s()[:x.Size()], shape...), nil
		}
		return nil, fmt.Errorf("dtype %v (want float32 or float64)", x.Dtype())
	case *G.F32:
		return tensor.FromF32(unsafe.Slice((*float32)(x), 1)), nil
	case *G.F64:
		return tensor.FromF64(unsafe.Slice((*float64)(x), 1)), nil
	case nil:
		return nil, fmt.Errorf("no value")
	}
	return nil, fmt.Errorf("value of type %T (want a float32 or float64 *tensor.Dense, *F32 or *F64)", v)
}

// firstElem is the address of t's storage, to notice rebinding.
func firstElem(t *tensor.Tensor) unsafe.Pointer {
	if t.DType() == tensor.Float64 {
		return unsafe.Pointer(&t.F64()[0])
	}
	return unsafe.Pointer(&t.F32()[0])
}

// zeroValue sets every element of a gradient value to zero.
func zeroValue(v G.Value) {
	switch x := v.(type) {
	case *gt.Dense:
		x.Zero()
	case *G.F32:
		*x = 0
	case *G.F64:
		*x = 0
	}
}

// scalarOf reads a scalar cost.
func scalarOf(v G.Value) (float64, bool) {
	switch x := v.(type) {
	case *G.F32:
		return float64(*x), true
	case *G.F64:
		return float64(*x), true
	case *gt.Dense:
		if x.Size() != 1 {
			return 0, false
		}
		switch d := x.Data().(type) {
		case []float32:
			return float64(d[0]), true
		case []float64:
			return d[0], true
		case float32:
			return float64(d), true
		case float64:
			return d, true
		}
	}
	return 0, false
}
