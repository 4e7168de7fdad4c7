package tensor

import "fmt"

// Copies between devices and dtypes for code that must not ask where a
// tensor lives (autograd, nn, optim): a host API's []float64 buffer, a
// state dict's tensors.

// Float64s returns a copy of t's elements, in row-major order, as float64
// on the host, waiting for t's device: the buffer of a host API that takes
// []float64 (an all-reduce across replicas).
func Float64s(t *Tensor) ([]float64, error) {
	host, err := t.To(CPU())
	if err != nil {
		return nil, err
	}
	out := New(Float64, t.shape...)
	if err := CopyConvert(out, host); err != nil {
		return nil, err
	}
	return out.f64[:out.Numel()], nil
}

// CopyFloat64s copies buf (row-major, t's element count) into t, on t's
// device and in t's dtype: Float64s's way back.
func CopyFloat64s(t *Tensor, buf []float64) error {
	if len(buf) != t.Numel() {
		return fmt.Errorf("%w: copy of %d values into %s", ErrDevice, len(buf), sh(t.shape))
	}
	src := New(Float64, t.shape...)
	copy(src.f64, buf)
	return CopyConvert(t, src)
}

// CopyConvert copies src's elements into dst (equal element counts,
// row-major order) wherever each lives, converting the dtype (float32,
// float64 and int64; floats become int64 by truncation, as torch's
// .long()): a state dict loaded into a module on any device. A device
// holds float32, so another dtype is converted on the host first.
func CopyConvert(dst, src *Tensor) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("%w: copy of %s into %s", ErrDevice, sh(src.shape), sh(dst.shape))
	}
	if dst.dtype == src.dtype && dst.dtype != Int64 {
		return Copy(dst, src)
	}
	if src.dev != nil {
		host, err := src.To(CPU())
		if err != nil {
			return err
		}
		src = host
	}
	src = src.Contiguous().Reshape(dst.shape...)
	if dst.dev != nil || !dst.IsContiguous() {
		conv := New(dst.dtype, dst.shape...)
		convertHost(conv, src)
		return Copy(dst, conv)
	}
	convertHost(dst, src)
	return nil
}

// convertHost copies the host tensor src into the contiguous host tensor
// dst of its shape, converting the dtype.
func convertHost(dst, src *Tensor) {
	n := dst.Numel()
	switch {
	case dst.dtype == Int64 && src.dtype == Int64:
		copy(dst.I64()[:n], src.I64()[:n])
	case dst.dtype == Int64 || src.dtype == Int64:
		s, d := src.Reshape(-1), dst.Reshape(-1)
		for i := range n {
			d.Set(s.At(i), i)
		}
	default:
		CopyFrom(dst, AsType(src, dst.dtype))
	}
}
