package tensor

import "fmt"

// SumAllOf returns the sum of a's elements as a 0-d tensor on a's device
// (torch's a.sum()); on the host it is SumAll's float64 sum in SumAll's
// order, rounded once to a's dtype.
func SumAllOf(a *Tensor) *Tensor {
	if a.dev != nil {
		return sumAllDevice(a, 1, "SumAllOf")
	}
	return scalarOf(a.dtype, SumAll(a))
}

// MeanAllOf returns the mean of a's elements as a 0-d tensor on a's device
// (torch's a.mean()), accumulated in SumAll's order and divided in float64.
func MeanAllOf(a *Tensor) *Tensor {
	n := a.Numel()
	if a.dev != nil {
		return sumAllDevice(a, 1/float64(max(n, 1)), "MeanAllOf")
	}
	return scalarOf(a.dtype, SumAll(a)/float64(n))
}

// scalarOf returns a 0-d host tensor holding v in dtype dt, set directly
// (Fill would turn -0 into +0).
func scalarOf(dt DType, v float64) *Tensor {
	y := New(dt)
	if dt == Float64 {
		y.F64()[0] = v
	} else {
		y.F32()[0] = float32(v)
	}
	return y
}

func sumAllDevice(a *Tensor, scale float64, op string) *Tensor {
	k := kernelsFor(op, a)
	x := a.Contiguous()
	NeedKernel(k.SumAll != nil && k.Scale != nil, op, x.Device())
	y := MustZerosOn(x.Device())
	k.SumAll(y, x)
	if scale != 1 {
		k.Scale(y, y, float32(scale))
	}
	return y
}

// ExpandScaled returns scale*gy, gy holding one element, at shape: the
// gradient of a sum or mean of every element. On the host it is one
// element expanded (stride 0), so consumers that take broadcast gradients
// read it without a tensor of the input's size being filled (a one-element
// shape gets a plain tensor, which may become a leaf's Grad as it is); on a
// device it is filled there, gy never read on the host.
func ExpandScaled(gy *Tensor, scale float64, shape ...int) *Tensor {
	if gy.Numel() != 1 {
		panic(fmt.Sprintf("tensor: ExpandScaled: gradient of shape %v, not one element", gy.shape))
	}
	if gy.dev != nil {
		k := kernelsFor("ExpandScaled", gy)
		NeedKernel(k.Fill != nil && k.ScaleBy != nil, "ExpandScaled", gy.Device())
		gx := MustZerosOn(gy.Device(), shape...)
		k.Fill(gx, float32(scale))
		k.ScaleBy(gx, gy)
		return gx
	}
	s := scalarOf(gy.dtype, gy.Item()*scale)
	if numel(shape) == 1 {
		return s.Reshape(shape...)
	}
	return Expand(s, shape...)
}
