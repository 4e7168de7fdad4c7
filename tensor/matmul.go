package tensor

import (
	"fmt"

	"slices"
)

// MatMul returns the matrix product of a and b with torch.matmul's rules:
// [m,k]x[k,n] -> [m,n]; batched [...,m,k]x[...,k,n] -> [...,m,n] with the
// batch dimensions broadcast; a 1-D operand is promoted to a row (a) or
// column (b) vector and that dimension is dropped from the result.
//
// Transposed views (t.T(), Transpose of the last two dims) reach Gemm as a
// transpose flag, not as a copy.
func MatMul(a, b *Tensor) *Tensor {
	checkDType("MatMul", a, b)
	if a.Dim() == 0 || b.Dim() == 0 {
		panic(fmt.Sprintf("tensor: MatMul: scalar operand (shapes %s and %s)", sh(a.shape), sh(b.shape)))
	}
	a2, b2 := a, b
	if a.Dim() == 1 {
		a2 = Unsqueeze(a, 0)
	}
	if b.Dim() == 1 {
		b2 = Unsqueeze(b, 1)
	}
	shape := matmulShape(a2, b2, a.shape, b.shape)
	out := New(a.dtype, shape...)
	matmulInto(out, a2, b2)
	switch {
	case a.Dim() == 1 && b.Dim() == 1:
		return out.Reshape()
	case a.Dim() == 1:
		return Squeeze(out, -2)
	case b.Dim() == 1:
		return Squeeze(out, -1)
	}
	return out
}

// MatMulInto writes MatMul(a, b) into out, which must be contiguous with the
// result's shape (a and b at least 2-D). It allocates nothing for 2-D
// operands, so hot loops can reuse out.
func MatMulInto(out, a, b *Tensor) {
	checkDType("MatMulInto", a, b)
	checkDType("MatMulInto", out, a)
	if a.Dim() < 2 || b.Dim() < 2 {
		panic(fmt.Sprintf("tensor: MatMulInto: operands must be at least 2-D (shapes %s and %s)", sh(a.shape), sh(b.shape)))
	}
	if a.Dim() == 2 && b.Dim() == 2 {
		m, k, k2, n := a.shape[0], a.shape[1], b.shape[0], b.shape[1]
		if k != k2 || !out.IsContiguous() || out.Dim() != 2 || out.shape[0] != m || out.shape[1] != n {
			panic(fmt.Sprintf("tensor: MatMulInto: out %s cannot hold %s x %s", sh(out.shape), sh(a.shape), sh(b.shape)))
		}
	} else {
		want := matmulShape(a, b, a.shape, b.shape)
		if !slices.Equal(want, out.shape) || !out.IsContiguous() {
			panic(fmt.Sprintf("tensor: MatMulInto: out %s cannot hold %s x %s (want %s)", sh(out.shape), sh(a.shape), sh(b.shape), sh(want)))
		}
	}
	matmulInto(out, a, b)
}

// matmulShape is the result shape of a x b (both at least 2-D); origA/origB
// are the caller's shapes for the panic message.
func matmulShape(a, b *Tensor, origA, origB []int) []int {
	ra, rb := a.Dim(), b.Dim()
	m, k := a.shape[ra-2], a.shape[ra-1]
	k2, n := b.shape[rb-2], b.shape[rb-1]
	if k != k2 {
		panic(fmt.Sprintf("tensor: MatMul: inner dimensions differ: shapes %s and %s", sh(origA), sh(origB)))
	}
	var batch []int
	if ra > 2 || rb > 2 {
		batch = broadcastShape("MatMul", a.shape[:ra-2], b.shape[:rb-2])
	}
	return append(batch, m, n)
}

// gemmOperand describes how a matrix view reaches Gemm: trans and ld, or
// ok=false when its strides need a contiguous copy first.
func gemmOperand(rows, cols, sr, sc int) (trans bool, ld int, ok bool) {
	switch {
	case sc == 1 && sr >= max(1, cols):
		return false, sr, true
	case sr == 1 && sc >= max(1, rows):
		return true, sc, true
	case rows == 1 && sc == 1:
		return false, max(1, cols), true
	case cols == 1 && sr == 1:
		return true, max(1, rows), true
	case rows == 1 && cols == 1:
		return false, 1, true
	}
	return false, 0, false
}

func matmulInto(out, a, b *Tensor) {
	ra, rb := a.Dim(), b.Dim()
	m, k, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	ta, lda, okA := gemmOperand(m, k, a.strides[ra-2], a.strides[ra-1])
	if !okA {
		a = a.Contiguous()
		ta, lda = false, max(1, k)
	}
	tb, ldb, okB := gemmOperand(k, n, b.strides[rb-2], b.strides[rb-1])
	if !okB {
		b = b.Contiguous()
		tb, ldb = false, max(1, n)
	}
	batchShape := out.shape[:out.Dim()-2]
	nb := numel(batchShape)
	if nb == 0 || m == 0 || n == 0 {
		return
	}
	var ba, bb, bi [maxStackDims]int
	rank := len(batchShape)
	sa, sb := ints(&ba, rank), ints(&bb, rank)
	if rank > 0 {
		// Strides of a's and b's batch dims at the broadcast batch shape.
		ah := &Tensor{shape: a.shape[:ra-2], strides: a.strides[:ra-2]}
		bh := &Tensor{shape: b.shape[:rb-2], strides: b.strides[:rb-2]}
		broadcastStrides(ah, batchShape, sa)
		broadcastStrides(bh, batchShape, sb)
	}
	idx := ints(&bi, rank)
	offA, offB := a.offset, b.offset
	mn := m * n
	for batch := 0; batch < nb; batch++ {
		o := out.offset + batch*mn
		if out.dtype == Float64 {
			Gemm64(ta, tb, m, n, k, 1, a.f64[offA:], lda, b.f64[offB:], ldb, 0, out.f64[o:o+mn], n)
		} else {
			Gemm(ta, tb, m, n, k, 1, a.f32[offA:], lda, b.f32[offB:], ldb, 0, out.f32[o:o+mn], n)
		}
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			offA += sa[d]
			offB += sb[d]
			if idx[d] < batchShape[d] {
				break
			}
			offA -= sa[d] * batchShape[d]
			offB -= sb[d] * batchShape[d]
			idx[d] = 0
		}
	}
}
