// Package gorgoniatensor converts between goddp's tensors and
// gorgonia.org/tensor's *Dense. It is the one place outside the interop
// packages (ddp/gorgoniaddp, examples/gorgonia) that imports gorgonia, so
// that the tensor core, and every program built on it, links none of
// gorgonia's dependencies (Arrow, flatbuffers, protobuf) unless it asks
// for this bridge.
package gorgoniatensor

import (
	"fmt"

	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/tensor"
)

// FromDense copies a gorgonia dense tensor (float32 or float64) into a new
// tensor. A view (a transpose, say) is materialized first, so the result
// holds its elements in the view's C order.
func FromDense(d *gt.Dense) (*tensor.Tensor, error) {
	src := d
	if d.IsMaterializable() {
		m, ok := d.Materialize().(*gt.Dense)
		if !ok {
			return nil, fmt.Errorf("gorgoniatensor: materialize dense view of shape %v: got %T", d.Shape(), d.Materialize())
		}
		src = m
	}
	shape := append([]int(nil), src.Shape()...)
	if src.IsScalar() {
		shape = nil
	}
	switch data := src.Data().(type) {
	case []float32:
		return tensor.FromF32(append([]float32(nil), data...), shape...), nil
	case []float64:
		return tensor.FromF64(append([]float64(nil), data...), shape...), nil
	case float32:
		return tensor.FromF32([]float32{data}), nil
	case float64:
		return tensor.FromF64([]float64{data}), nil
	}
	return nil, fmt.Errorf("gorgoniatensor: unsupported dense dtype %v (want float32 or float64)", src.Dtype())
}

// ToDense returns a gorgonia *Dense holding t's elements with its shape (a
// 0-d tensor becomes shape [1], gorgonia's vector of one). For a
// contiguous tensor it aliases the storage, so writes through either show
// in both; otherwise it is a copy.
func ToDense(t *tensor.Tensor) *gt.Dense {
	c := t.Contiguous()
	shape := append([]int(nil), c.Shape()...) // Shape is the tensor's own slice
	if len(shape) == 0 {
		shape = []int{1}
	}
	switch c.DType() {
	case tensor.Float64:
		return gt.New(gt.WithShape(shape...), gt.WithBacking(c.F64()))
	case tensor.Int64:
		return gt.New(gt.WithShape(shape...), gt.WithBacking(c.I64()))
	}
	return gt.New(gt.WithShape(shape...), gt.WithBacking(c.F32()))
}
