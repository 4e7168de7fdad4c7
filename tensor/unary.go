package tensor

import (
	"fmt"
	"math"
)

// unOp selects the kernel of an elementwise unary op; p0 and p1 carry its
// scalar parameters (the scalar of AddScalar, Clamp's bounds, ...).
type unOp uint8

const (
	opNeg unOp = iota
	opExp
	opLog
	opSqrt
	opReLU
	opGELU
	opSigmoid
	opTanh
	opClamp
	opAddS
	opMulS
	opPowS
	opAbs
	opRsubS // s - x
	opRdivS // s / x
)

var unOpNames = [...]string{"Neg", "Exp", "Log", "Sqrt", "ReLU", "GELU", "Sigmoid", "Tanh", "Clamp",
	"AddScalar", "MulScalar", "PowScalar", "Abs", "RSubScalar", "RDivScalar"}

// Neg returns -a.
func Neg(a *Tensor) *Tensor { return unary(opNeg, a, 0, 0) }

// Exp returns e**a.
func Exp(a *Tensor) *Tensor { return unary(opExp, a, 0, 0) }

// Log returns the natural logarithm of a.
func Log(a *Tensor) *Tensor { return unary(opLog, a, 0, 0) }

// Sqrt returns the square root of a.
func Sqrt(a *Tensor) *Tensor { return unary(opSqrt, a, 0, 0) }

// Abs returns |a|.
func Abs(a *Tensor) *Tensor { return unary(opAbs, a, 0, 0) }

// ReLU returns max(a, 0) (NaN stays NaN, as in torch).
func ReLU(a *Tensor) *Tensor { return unary(opReLU, a, 0, 0) }

// GELU returns a * Φ(a) in the exact erf form, torch's default:
// 0.5 * a * (1 + erf(a / √2)).
func GELU(a *Tensor) *Tensor { return unary(opGELU, a, 0, 0) }

// Sigmoid returns 1 / (1 + e**-a), computed without overflow for large |a|.
func Sigmoid(a *Tensor) *Tensor { return unary(opSigmoid, a, 0, 0) }

// Tanh returns the hyperbolic tangent of a.
func Tanh(a *Tensor) *Tensor { return unary(opTanh, a, 0, 0) }

// Clamp limits a to [lo, hi]. Use math.Inf for a one-sided clamp. It runs
// the Clamp entry of a's device.
func Clamp(a *Tensor, lo, hi float64) *Tensor {
	if lo > hi {
		panic(fmt.Sprintf("tensor: Clamp: lo %v > hi %v (shape %s)", lo, hi, sh(a.shape)))
	}
	k := table("Clamp", a)
	need(k.Clamp != nil, "Clamp", a)
	x := a.Contiguous()
	y := EmptyAs(x, x.shape...) // written whole
	k.Clamp(y, x, lo, hi)
	return y
}

// AddScalar returns a + s.
func AddScalar(a *Tensor, s float64) *Tensor { return unary(opAddS, a, s, 0) }

// MulScalar returns a * s.
func MulScalar(a *Tensor, s float64) *Tensor { return unary(opMulS, a, s, 0) }

// PowScalar returns a ** p. It runs the PowScalar entry of a's device.
func PowScalar(a *Tensor, p float64) *Tensor {
	k := table("PowScalar", a)
	need(k.PowScalar != nil, "PowScalar", a)
	x := a.Contiguous()
	y := EmptyAs(x, x.shape...) // written whole
	k.PowScalar(y, x, p)
	return y
}

// RSubScalar returns s - a.
func RSubScalar(s float64, a *Tensor) *Tensor { return unary(opRsubS, a, s, 0) }

// RDivScalar returns s / a.
func RDivScalar(s float64, a *Tensor) *Tensor { return unary(opRdivS, a, s, 0) }

func unary(op unOp, a *Tensor, p0, p1 float64) *Tensor {
	if a.dev != nil {
		return unaryDevice(op, a, p0)
	}
	out := newFull(a.dtype, a.shape...) // every kernel and loop writes each element
	c := a.Contiguous()
	if k := float32Kernel(op); a.dtype == Float32 && k != nil {
		k(out.f32, c.F32())
		return out
	}
	if a.dtype == Float64 {
		unaryLoop(op, out.f64, c.F64(), p0, p1)
	} else {
		unaryLoop(op, out.f32, c.F32(), p0, p1)
	}
	return out
}

// float32Kernel returns the slice kernel (relu.go, fastmath.go) that runs
// op on float32, or nil for the ops unaryLoop serves.
func float32Kernel(op unOp) func(dst, src []float32) {
	switch op {
	case opReLU:
		return ReLUF32
	case opExp:
		return ExpF32
	case opSigmoid:
		return SigmoidF32
	case opTanh:
		return TanhF32
	case opGELU:
		return GELUF32
	}
	return nil
}

const invSqrt2 = 0.70710678118654752440

func unaryLoop[T float](op unOp, dst, x []T, p0, p1 float64) {
	x = x[:len(dst)]
	switch op {
	case opNeg:
		for i, v := range x {
			dst[i] = -v
		}
	case opExp:
		for i, v := range x {
			dst[i] = T(math.Exp(float64(v)))
		}
	case opLog:
		for i, v := range x {
			dst[i] = T(math.Log(float64(v)))
		}
	case opSqrt:
		for i, v := range x {
			dst[i] = T(math.Sqrt(float64(v)))
		}
	case opAbs:
		for i, v := range x {
			dst[i] = T(math.Abs(float64(v)))
		}
	case opReLU:
		for i, v := range x {
			if v < 0 {
				dst[i] = 0
			} else {
				dst[i] = v
			}
		}
	case opGELU:
		for i, v := range x {
			f := float64(v)
			dst[i] = T(0.5 * f * (1 + math.Erf(f*invSqrt2)))
		}
	case opSigmoid:
		for i, v := range x {
			dst[i] = T(sigmoid(float64(v)))
		}
	case opTanh:
		for i, v := range x {
			dst[i] = T(math.Tanh(float64(v)))
		}
	case opClamp:
		lo, hi := T(p0), T(p1)
		for i, v := range x {
			switch {
			case v < lo:
				dst[i] = lo
			case v > hi:
				dst[i] = hi
			default:
				dst[i] = v
			}
		}
	case opAddS:
		s := T(p0)
		for i, v := range x {
			dst[i] = v + s
		}
	case opMulS:
		s := T(p0)
		for i, v := range x {
			dst[i] = v * s
		}
	case opRsubS:
		s := T(p0)
		for i, v := range x {
			dst[i] = s - v
		}
	case opRdivS:
		s := T(p0)
		for i, v := range x {
			dst[i] = s / v
		}
	case opPowS:
		switch p0 {
		case 2:
			for i, v := range x {
				dst[i] = v * v
			}
		case 1:
			copy(dst, x)
		case 0.5:
			for i, v := range x {
				dst[i] = T(math.Sqrt(float64(v)))
			}
		case -1:
			for i, v := range x {
				dst[i] = 1 / v
			}
		default:
			for i, v := range x {
				dst[i] = T(math.Pow(float64(v), p0))
			}
		}
	default:
		panic(fmt.Sprintf("tensor: unknown unary op %d", op))
	}
}

// sigmoid is 1/(1+e^-x) arranged so the exponent is never positive.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}
