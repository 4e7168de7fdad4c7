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
	// The products write y whole (beta 0), unless k is 0.
	y := tensor.EmptyAs(ac, oshape...)
	if k == 0 {
		y = tensor.ZerosAs(ac, oshape...)
	}
	if o.flat {
		tensor.GemmBatch(false, false, o.rows, n, k, ac, nil, bc, nil, 0, y, 1)
	} else {
		tensor.GemmBatch(false, false, m, n, k, ac, o.aIdx, bc, o.bIdx, 0, y, len(o.aIdx))
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

func (o *matmulOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

// backwardInto runs the gradients' GEMMs on gy's device. Flat (b 2-D), they
// add into the Grad buffers the engine offers (dst, beta 1), else write new
// tensors; batched, the gradients come at the broadcast batch shape and the
// engine reduces them to each input's shape.
func (o *matmulOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	m, k, n := o.m, o.k, o.n
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 2)
	// into returns where gradient i goes and the beta that adds into it:
	// the engine's buffer, or a new tensor the product writes whole (zeroed
	// when the product's inner dimension is 0 and it writes nothing).
	into := func(i int, inner int, shape []int) (*tensor.Tensor, float32) {
		if o.flat && i < len(dst) && dst[i] != nil {
			return dst[i], 1
		}
		if inner == 0 {
			grads[i] = tensor.ZerosAs(gy, shape...)
		} else {
			grads[i] = tensor.EmptyAs(gy, shape...)
		}
		return grads[i], 0
	}
	if o.flat {
		if needs(o.in(0)) {
			da, beta := into(0, n, o.ac.Shape())
			tensor.GemmBatch(false, true, o.rows, k, n, gy, nil, o.bc, nil, beta, da, 1)
		}
		if needs(o.in(1)) {
			db, beta := into(1, o.rows, o.bc.Shape())
			tensor.GemmBatch(true, false, k, n, o.rows, o.ac, nil, gy, nil, beta, db, 1)
		}
		return grads
	}
	nb := len(o.aIdx)
	if needs(o.in(0)) {
		ga, _ := into(0, n, append(cloneInts(o.obatch), m, k))
		tensor.GemmBatch(false, true, m, k, n, gy, nil, o.bc, o.bIdx, 0, ga, nb)
	}
	if needs(o.in(1)) {
		gb, _ := into(1, m, append(cloneInts(o.obatch), k, n))
		tensor.GemmBatch(true, false, k, n, m, o.ac, o.aIdx, gy, nil, 0, gb, nb)
	}
	return grads
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
