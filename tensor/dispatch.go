package tensor

import "fmt"

// Ops dispatch here on their operands' device, so that autograd and optim
// call one tensor op whatever the device (as tinygrad, where the device is a
// field of the buffer): a host operand runs the op's CPU code, a device
// operand the entry of its device's Kernels table. Only this package looks
// at where a tensor lives.

// onDevice reports whether any of ts (nil skipped) lives on a device: the
// one-word test an op makes before its CPU code.
func onDevice(ts ...*Tensor) bool {
	for _, t := range ts {
		if t != nil && t.dev != nil {
			return true
		}
	}
	return false
}

// kernelsFor returns the op table of the device that every non-nil operand
// lives on. Operands on different devices panic naming both ("tensor: Add:
// operands on cpu and sim:0"), as torch's "Expected all tensors to be on the
// same device": it is math on wrong operands, which panics by the error
// policy. A device without a table panics with NoKernel.
func kernelsFor(op string, ts ...*Tensor) *Kernels {
	var first *Tensor
	for _, t := range ts {
		if t == nil {
			continue
		}
		if first == nil {
			first = t
			continue
		}
		if !sameDevice(first, t) {
			panic(fmt.Sprintf("tensor: %s: operands on %v and %v", op, first.Device(), t.Device()))
		}
	}
	if first == nil || first.dev == nil {
		return nil
	}
	k := first.dev.s.Device().Kernels()
	if k == nil {
		panic(NoKernel(op, first.Device()))
	}
	return k
}

func sameDevice(a, b *Tensor) bool {
	if a.dev == nil || b.dev == nil {
		return a.dev == nil && b.dev == nil
	}
	return a.dev.s.Device() == b.dev.s.Device()
}

// ZerosAs returns a zero tensor of like's dtype on like's device with the
// given shape (no shape is a 0-d tensor, as New): the buffer an op
// allocates for its result or gradient.
func ZerosAs(like *Tensor, shape ...int) *Tensor {
	if like.dev == nil {
		return New(like.dtype, shape...)
	}
	return MustZerosOn(like.Device(), shape...)
}

// sameShape reports whether a and b have equal shapes.
func sameShape(a, b *Tensor) bool {
	if len(a.shape) != len(b.shape) {
		return false
	}
	for i, d := range a.shape {
		if b.shape[i] != d {
			return false
		}
	}
	return true
}

// binaryDevice is a broadcasting binary op on a device. Devices add equal
// shapes and a [..., C] + [C] bias; everything else has no kernel.
func binaryDevice(op binOp, a, b *Tensor) *Tensor {
	name := binOpNames[op]
	k := kernelsFor(name, a, b)
	if op != opAdd {
		panic(NoKernel(name, a.Device()))
	}
	x, z := a.Contiguous(), b.Contiguous()
	if z.Dim() > x.Dim() {
		x, z = z, x // addition commutes: broadcast the smaller operand
	}
	y := MustZerosOn(x.Device(), x.shape...)
	switch {
	case sameShape(x, z):
		NeedKernel(k.Add != nil, name, x.Device())
		k.Add(y, x, z)
	case z.Dim() >= 1 && equalInts(x.shape[x.Dim()-z.Dim():], z.shape) && z.Numel() > 0:
		// z repeats along x's leading dimensions (a bias [C], a position
		// embedding [T, C] added to [B, T, C]): a bias over rows of z.Numel().
		NeedKernel(k.Copy != nil && k.AddBias != nil, name, x.Device())
		k.Copy(y, x)
		k.AddBias(y.Reshape(-1, z.Numel()), z.Reshape(z.Numel()))
	default:
		panic(NoKernel(fmt.Sprintf("%s broadcasting %v to %v", name, z.shape, x.shape), x.Device()))
	}
	return y
}

// unaryDevice is an elementwise unary op on a device.
func unaryDevice(op unOp, a *Tensor) *Tensor {
	name := unOpNames[op]
	k := kernelsFor(name, a)
	if op != opReLU {
		panic(NoKernel(name, a.Device()))
	}
	NeedKernel(k.ReLU != nil, name, a.Device())
	x := a.Contiguous()
	y := MustZerosOn(x.Device(), x.shape...)
	k.ReLU(y, x)
	return y
}
