package tensor

import (
	"fmt"
	"math"
	"slices"
)

type float interface{ ~float32 | ~float64 }

// binOp selects the kernel of a broadcasting binary op. The switch sits
// outside the element loops so each loop is a plain slice loop the compiler
// can bounds-check-eliminate.
type binOp uint8

const (
	opAdd binOp = iota
	opSub
	opMul
	opDiv
	opPow
	opMax2 // elementwise maximum, used by Clamp-like helpers
)

var binOpNames = [...]string{"Add", "Sub", "Mul", "Div", "Pow", "Maximum"}

// Add returns a + b with broadcasting.
func Add(a, b *Tensor) *Tensor { return binary(opAdd, a, b) }

// Sub returns a - b with broadcasting.
func Sub(a, b *Tensor) *Tensor { return binary(opSub, a, b) }

// Mul returns a * b elementwise with broadcasting.
func Mul(a, b *Tensor) *Tensor { return binary(opMul, a, b) }

// Div returns a / b with broadcasting.
func Div(a, b *Tensor) *Tensor { return binary(opDiv, a, b) }

// Pow returns a ** b elementwise with broadcasting.
func Pow(a, b *Tensor) *Tensor { return binary(opPow, a, b) }

// Maximum returns the elementwise maximum of a and b with broadcasting
// (NaN propagates, as torch.maximum).
func Maximum(a, b *Tensor) *Tensor { return binary(opMax2, a, b) }

func binary(op binOp, a, b *Tensor) *Tensor {
	if a.dev != nil || b.dev != nil {
		return binaryDevice(op, a, b)
	}
	name := binOpNames[op]
	checkDType(name, a, b)
	var buf [maxStackDims]int
	shape := a.shape
	if !slices.Equal(a.shape, b.shape) {
		shape = broadcastShapeInto(name, a.shape, b.shape, ints(&buf, max(a.Dim(), b.Dim())))
	}
	out := newFull(a.dtype, shape...) // binaryInto writes every element
	binaryInto(op, out, a, b)
	return out
}

// binaryInto writes op(a, b) into out, which must be contiguous with the
// broadcast shape. out may alias a or b exactly (same storage, same layout).
func binaryInto(op binOp, out, a, b *Tensor) {
	if out.dtype == Float64 {
		binaryStrided(op, out.f64[out.offset:out.offset+out.Numel()], out.shape, a, a.f64, b, b.f64)
	} else {
		binaryStrided(op, out.f32[out.offset:out.offset+out.Numel()], out.shape, a, a.f32, b, b.f32)
	}
}

func binaryStrided[T float](op binOp, dst []T, shape []int, a *Tensor, ad []T, b *Tensor, bd []T) {
	if a.IsContiguous() && b.IsContiguous() {
		na, nb := a.Numel(), b.Numel()
		av, bv := ad[a.offset:a.offset+na], bd[b.offset:b.offset+nb]
		switch {
		case na == len(dst) && nb == len(dst):
			binVV(op, dst, av, bv)
			return
		case nb == 1 && na == len(dst):
			binVS(op, dst, av, bv[0])
			return
		case na == 1 && nb == len(dst):
			binSV(op, dst, av[0], bv)
			return
		case na == len(dst) && nb > 0 && len(dst)%nb == 0 && isTrailing(b.shape, shape):
			// Row broadcast (bias add): b repeats every nb elements.
			for r := 0; r < len(dst); r += nb {
				binVV(op, dst[r:r+nb], av[r:r+nb], bv)
			}
			return
		}
	}
	var bs, ba, bb [maxStackDims]int
	rank := len(shape)
	if rank == 0 {
		binVV(op, dst, ad[a.offset:a.offset+1], bd[b.offset:b.offset+1])
		return
	}
	sh := ints(&bs, rank)
	copy(sh, shape)
	sa, sb := ints(&ba, rank), ints(&bb, rank)
	broadcastStrides(a, shape, sa)
	broadcastStrides(b, shape, sb)
	rank = collapse(sh, sa, sb)
	inner := sh[rank-1]
	ia, ib := sa[rank-1], sb[rank-1]
	var bi [maxStackDims]int
	idx := ints(&bi, rank)
	offA, offB := a.offset, b.offset
	for o := 0; o < len(dst); o += inner {
		d := dst[o : o+inner]
		switch {
		case ia == 1 && ib == 1:
			binVV(op, d, ad[offA:offA+inner], bd[offB:offB+inner])
		case ia == 1 && ib == 0:
			binVS(op, d, ad[offA:offA+inner], bd[offB])
		case ia == 0 && ib == 1:
			binSV(op, d, ad[offA], bd[offB:offB+inner])
		case ia == 0 && ib == 0:
			splat(d, binScalar(op, ad[offA], bd[offB]))
		default:
			for j := range d {
				d[j] = binScalar(op, ad[offA+j*ia], bd[offB+j*ib])
			}
		}
		// Advance the outer index (all but the innermost dimension).
		for k := rank - 2; k >= 0; k-- {
			idx[k]++
			offA += sa[k]
			offB += sb[k]
			if idx[k] < sh[k] {
				break
			}
			offA -= sa[k] * sh[k]
			offB -= sb[k] * sh[k]
			idx[k] = 0
		}
	}
}

// isTrailing reports whether small equals the trailing dimensions of big once
// its leading 1s are dropped, i.e. small broadcasts along big's leading dims.
func isTrailing(small, big []int) bool {
	i := 0
	for i < len(small) && small[i] == 1 {
		i++
	}
	s := small[i:]
	if len(s) > len(big) {
		return false
	}
	return slices.Equal(s, big[len(big)-len(s):])
}

func binScalar[T float](op binOp, x, y T) T {
	switch op {
	case opAdd:
		return x + y
	case opSub:
		return x - y
	case opMul:
		return x * y
	case opDiv:
		return x / y
	case opPow:
		return T(math.Pow(float64(x), float64(y)))
	case opMax2:
		if x != x || x > y {
			return x
		}
		return y
	}
	panic(fmt.Sprintf("tensor: unknown binary op %d", op))
}

// binVV sets dst[i] = x[i] op y[i]. Add, Sub, Mul and Div on long slices go
// through the vector kernels (binary_kernels.c), which give the same bits as
// the Go loops of binVVGo.
func binVV[T float](op binOp, dst, x, y []T) {
	x, y = x[:len(dst)], y[:len(dst)]
	if len(dst) >= binCMin && op <= opDiv && binVVC(op, dst, x, y) {
		return
	}
	binVVGo(op, dst, x, y)
}

func binVVGo[T float](op binOp, dst, x, y []T) {
	x, y = x[:len(dst)], y[:len(dst)]
	switch op {
	case opAdd:
		for i := range dst {
			dst[i] = x[i] + y[i]
		}
	case opSub:
		for i := range dst {
			dst[i] = x[i] - y[i]
		}
	case opMul:
		for i := range dst {
			dst[i] = x[i] * y[i]
		}
	case opDiv:
		for i := range dst {
			dst[i] = x[i] / y[i]
		}
	default:
		for i := range dst {
			dst[i] = binScalar(op, x[i], y[i])
		}
	}
}

// binVS sets dst[i] = x[i] op y (vector kernels as binVV).
func binVS[T float](op binOp, dst, x []T, y T) {
	x = x[:len(dst)]
	if len(dst) >= binCMin && op <= opDiv && binVSC(op, dst, x, y) {
		return
	}
	binVSGo(op, dst, x, y)
}

func binVSGo[T float](op binOp, dst, x []T, y T) {
	x = x[:len(dst)]
	switch op {
	case opAdd:
		for i := range dst {
			dst[i] = x[i] + y
		}
	case opSub:
		for i := range dst {
			dst[i] = x[i] - y
		}
	case opMul:
		for i := range dst {
			dst[i] = x[i] * y
		}
	case opDiv:
		for i := range dst {
			dst[i] = x[i] / y
		}
	default:
		for i := range dst {
			dst[i] = binScalar(op, x[i], y)
		}
	}
}

// binSV sets dst[i] = x op y[i] (vector kernels as binVV).
func binSV[T float](op binOp, dst []T, x T, y []T) {
	y = y[:len(dst)]
	if len(dst) >= binCMin && op <= opDiv && binSVC(op, dst, x, y) {
		return
	}
	binSVGo(op, dst, x, y)
}

func binSVGo[T float](op binOp, dst []T, x T, y []T) {
	y = y[:len(dst)]
	switch op {
	case opAdd:
		for i := range dst {
			dst[i] = x + y[i]
		}
	case opSub:
		for i := range dst {
			dst[i] = x - y[i]
		}
	case opMul:
		for i := range dst {
			dst[i] = x * y[i]
		}
	case opDiv:
		for i := range dst {
			dst[i] = x / y[i]
		}
	default:
		for i := range dst {
			dst[i] = binScalar(op, x, y[i])
		}
	}
}
