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

// EmptyAs is ZerosAs for a result its op overwrites whole (a GEMM's
// output with beta 0): its elements are not initialized (Empty on the
// host, MustEmptyOn on a device).
func EmptyAs(like *Tensor, shape ...int) *Tensor {
	if like.dev == nil {
		return newFull(like.dtype, shape...)
	}
	return MustEmptyOn(like.Device(), shape...)
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

// binaryDevice is a broadcasting binary op on a device: Add, Sub, Mul and
// Div. An operand that broadcasts is materialized at the result's shape
// first (a strided copy), except the bias of an Add ([..., C] + [C], a
// position embedding [T, C] added to [B, T, C]), which has a kernel of
// its own. Pow and Maximum have no kernel.
func binaryDevice(op binOp, a, b *Tensor) *Tensor {
	name := binOpNames[op]
	k := kernelsFor(name, a, b)
	checkDType(name, a, b)
	var kern func(y, a, b *Tensor)
	switch op {
	case opAdd:
		kern = k.Add
	case opSub:
		kern = k.Sub
	case opMul:
		kern = k.Mul
	case opDiv:
		kern = k.Div
	}
	dev := a.Device()
	if a.dev == nil {
		dev = b.Device()
	}
	NeedKernel(kern != nil, name, dev)
	if op == opAdd && !sameShape(a, b) {
		x, z := a, b
		if z.Dim() > x.Dim() {
			x, z = z, x // addition commutes: the smaller operand is the bias
		}
		if z.Dim() >= 1 && equalInts(x.shape[x.Dim()-z.Dim():], z.shape) && z.Numel() > 0 {
			NeedKernel(k.Copy != nil && k.AddBias != nil, name, dev)
			y := MustEmptyOn(dev, x.shape...)
			k.Copy(y, x.Contiguous())
			k.AddBias(y.Reshape(-1, z.Numel()), z.Contiguous().Reshape(z.Numel()))
			return y
		}
	}
	shape := a.shape
	if !sameShape(a, b) {
		shape = broadcastShapeInto(name, a.shape, b.shape, make([]int, max(a.Dim(), b.Dim())))
	}
	y := MustEmptyOn(dev, shape...)
	kern(y, expandTo(a, shape), expandTo(b, shape))
	return y
}

// unaryDevice is an elementwise unary op on a device: ReLU, GELU, Exp,
// Log, Sqrt, Tanh and Sigmoid by their kernels, Neg and MulScalar as a
// scale, AddScalar and RSubScalar as a fill and an axpy. The others
// (Clamp, PowScalar, Abs, RDivScalar) have no kernel.
func unaryDevice(op unOp, a *Tensor, p0 float64) *Tensor {
	name := unOpNames[op]
	k := kernelsFor(name, a)
	var kern func(y, x *Tensor)
	switch op {
	case opReLU:
		kern = k.ReLU
	case opGELU:
		kern = k.GELU
	case opExp:
		kern = k.Exp
	case opLog:
		kern = k.Log
	case opSqrt:
		kern = k.Sqrt
	case opTanh:
		kern = k.Tanh
	case opSigmoid:
		kern = k.Sigmoid
	case opNeg, opMulS:
		s := float32(p0)
		if op == opNeg {
			s = -1
		}
		if k.Scale != nil {
			kern = func(y, x *Tensor) { k.Scale(y, x, s) }
		}
	case opAddS, opRsubS:
		alpha := float32(1)
		if op == opRsubS {
			alpha = -1
		}
		if k.Fill != nil && k.Axpy != nil {
			kern = func(y, x *Tensor) { k.Fill(y, float32(p0)); k.Axpy(y, alpha, x) }
		}
	}
	NeedKernel(kern != nil, name, a.Device())
	x := a.Contiguous()
	y := MustEmptyOn(x.Device(), x.shape...)
	kern(y, x)
	return y
}
