package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// MatMul returns the matrix product of a [..., m, k] and b [..., k, n] with
// broadcast batch dimensions, as torch.matmul for inputs of rank >= 2.
//
// When b is 2-D (x @ W with x of any rank) the batch folds into the rows and
// forward and both gradients are single GEMMs; dW then accumulates straight
// into W's Grad buffer when it exists. Otherwise each batch runs its own
// GEMM and gradients come back at the broadcast batch shape for the engine
// to reduce.
func MatMul(a, b *Variable) *Variable {
	as, bs := a.Value.Shape(), b.Value.Shape()
	if len(as) < 2 || len(bs) < 2 || as[len(as)-1] != bs[len(bs)-2] {
		panic(fmt.Sprintf("autograd: MatMul: shapes %v and %v do not multiply (want [..., m, k] @ [..., k, n])", as, bs))
	}
	sameDType("MatMul", a.Value, b.Value)
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	ac, bc := a.Value.Contiguous(), b.Value.Contiguous()
	o := &matmulOp{inputs: ins(a, b), ac: ac, bc: bc, m: m, k: k, n: n}
	var oshape []int
	if len(bs) == 2 {
		o.flat = true
		o.rows = ac.Numel() / k
		oshape = append(cloneInts(as[:len(as)-1]), n)
	} else {
		o.obatch = broadcastBatch(as[:len(as)-2], bs[:len(bs)-2])
		o.aIdx, o.bIdx = batchOffsets(o.obatch, as[:len(as)-2], bs[:len(bs)-2])
		oshape = append(cloneInts(o.obatch), m, n)
	}
	y := tensor.New(ac.DType(), oshape...)
	if y.DType() == tensor.Float64 {
		matmulFwd(o, y.F64(), ac.F64(), bc.F64())
	} else {
		matmulFwd(o, y.F32(), ac.F32(), bc.F32())
	}
	return FromOp(y, o)
}

type matmulOp struct {
	inputs
	ac, bc     *tensor.Tensor // contiguous values of a and b
	m, k, n    int
	flat       bool  // b is 2-D: a's batch folds into rows
	rows       int   // flat: rows of a viewed as [rows, k]
	obatch     []int // batched: broadcast batch shape
	aIdx, bIdx []int // batched: matrix index in a and b for each output batch
}

func (o *matmulOp) Name() string { return "MatMul" }
func (o *matmulOp) freshGrads()  {}

func matmulFwd[T float](o *matmulOp, y, a, b []T) {
	m, k, n := o.m, o.k, o.n
	if o.flat {
		gemm(false, false, o.rows, n, k, 1, a, k, b, n, 0, y, n)
		return
	}
	for bi := range o.aIdx {
		ab, bb := a[o.aIdx[bi]*m*k:], b[o.bIdx[bi]*k*n:]
		gemm(false, false, m, n, k, 1, ab[:m*k], k, bb[:k*n], n, 0, y[bi*m*n:(bi+1)*m*n], n)
	}
}

func (o *matmulOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *matmulOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	if gy.DType() == tensor.Float64 {
		matmulBwd[float64](o, gy, dst, grads)
	} else {
		matmulBwd[float32](o, gy, dst, grads)
	}
	return grads
}

func matmulBwd[T float](o *matmulOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	m, k, n := o.m, o.k, o.n
	gy, a, b := data[T](gyT), data[T](o.ac), data[T](o.bc)
	if o.flat {
		into := func(i int, shape []int) ([]T, T) {
			if i < len(dst) && dst[i] != nil {
				return data[T](dst[i]), 1
			}
			grads[i] = tensor.New(gyT.DType(), shape...)
			return data[T](grads[i]), 0
		}
		if needs(o.in(0)) {
			da, beta := into(0, o.ac.Shape())
			gemm(false, true, o.rows, k, n, 1, gy, n, b, n, beta, da, k)
		}
		if needs(o.in(1)) {
			db, beta := into(1, o.bc.Shape())
			gemm(true, false, k, n, o.rows, 1, a, k, gy, n, beta, db, n)
		}
		return
	}
	// Batched: gradients at the broadcast batch shape; the engine reduces
	// them to each input's shape.
	nb := len(o.aIdx)
	if needs(o.in(0)) {
		ga := tensor.New(gyT.DType(), append(cloneInts(o.obatch), m, k)...)
		da := data[T](ga)
		for bi := 0; bi < nb; bi++ {
			bb := b[o.bIdx[bi]*k*n : (o.bIdx[bi]+1)*k*n]
			gemm(false, true, m, k, n, 1, gy[bi*m*n:(bi+1)*m*n], n, bb, n, 0, da[bi*m*k:(bi+1)*m*k], k)
		}
		grads[0] = ga
	}
	if needs(o.in(1)) {
		gb := tensor.New(gyT.DType(), append(cloneInts(o.obatch), k, n)...)
		db := data[T](gb)
		for bi := 0; bi < nb; bi++ {
			ab := a[o.aIdx[bi]*m*k : (o.aIdx[bi]+1)*m*k]
			gemm(true, false, k, n, m, 1, ab, k, gy[bi*m*n:(bi+1)*m*n], n, 0, db[bi*k*n:(bi+1)*k*n], n)
		}
		grads[1] = gb
	}
}

// broadcastBatch returns the broadcast of two batch shapes (numpy rules).
func broadcastBatch(a, b []int) []int {
	r := max(len(a), len(b))
	out := make([]int, r)
	for i := 0; i < r; i++ {
		da, db := 1, 1
		if j := i - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			panic(fmt.Sprintf("autograd: MatMul: batch shapes %v and %v do not broadcast", a, b))
		}
	}
	return out
}

// batchOffsets returns, for every output batch (C order over obatch), the
// index of the matrix it reads in a and in b.
func batchOffsets(obatch, a, b []int) (aIdx, bIdx []int) {
	total := 1
	for _, d := range obatch {
		total *= d
	}
	strides := func(s []int) []int {
		st := make([]int, len(obatch))
		acc := 1
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] != 1 {
				st[len(obatch)-len(s)+i] = acc
			}
			acc *= s[i]
		}
		return st
	}
	as, bs := strides(a), strides(b)
	aIdx, bIdx = make([]int, total), make([]int, total)
	idx := make([]int, len(obatch))
	ao, bo := 0, 0
	for t := 0; t < total; t++ {
		aIdx[t], bIdx[t] = ao, bo
		for q := len(idx) - 1; q >= 0; q-- {
			idx[q]++
			ao += as[q]
			bo += bs[q]
			if idx[q] < obatch[q] {
				break
			}
			ao -= as[q] * idx[q]
			bo -= bs[q] * idx[q]
			idx[q] = 0
		}
	}
	return aIdx, bIdx
}
