package tensor

import (
	"fmt"
	"math"
)

// Ones returns a tensor filled with 1.
func Ones(dt DType, shape ...int) *Tensor { return Full(dt, 1, shape...) }

// Full returns a tensor filled with v.
func Full(dt DType, v float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	Fill(t, v)
	return t
}

// Scalar returns a 0-D tensor holding v.
func Scalar(dt DType, v float64) *Tensor { return Full(dt, v) }

// Arange returns the 1-D tensor [start, start+step, ...) stopping before
// stop, as torch.arange.
func Arange(dt DType, start, stop, step float64) *Tensor {
	if step == 0 || math.IsNaN(start) || math.IsNaN(stop) || math.IsNaN(step) {
		panic(fmt.Sprintf("tensor: Arange: bad range start=%v stop=%v step=%v", start, stop, step))
	}
	n := int(math.Ceil((stop - start) / step))
	if n < 0 {
		n = 0
	}
	t := New(dt, n)
	for i := 0; i < n; i++ {
		v := start + float64(i)*step
		if dt == Float64 {
			t.f64[i] = v
		} else {
			t.f32[i] = float32(v)
		}
	}
	return t
}

// ZerosLike returns a zero tensor with a's dtype and shape.
func ZerosLike(a *Tensor) *Tensor { return New(a.dtype, a.shape...) }

// OnesLike returns a tensor of ones with a's dtype and shape.
func OnesLike(a *Tensor) *Tensor { return Full(a.dtype, 1, a.shape...) }

// AsType returns a new contiguous copy of a converted to dt.
func AsType(a *Tensor, dt DType) *Tensor {
	c := a.Contiguous()
	out := New(dt, a.shape...)
	n := out.Numel()
	switch {
	case c.dtype == Float32 && dt == Float32:
		copy(out.f32, c.F32())
	case c.dtype == Float64 && dt == Float64:
		copy(out.f64, c.F64())
	case c.dtype == Float32:
		src := c.F32()
		for i := 0; i < n; i++ {
			out.f64[i] = float64(src[i])
		}
	default:
		src := c.F64()
		for i := 0; i < n; i++ {
			out.f32[i] = float32(src[i])
		}
	}
	return out
}
