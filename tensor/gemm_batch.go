package tensor

import "fmt"

// GemmBatch runs c_i = op(a_{aIdx[i]}) · op(b_{bIdx[i]}) + beta·c_i for
// i < batch on the operands' device, by its table's GEMM entries (the
// CPU's included): autograd's MatMul, forward and backward, with a
// broadcast batch. a, b and c are contiguous and hold their matrices one
// after another: a's m×k (k×m with transA), b's k×n (n×k with transB), c's
// m×n. A nil index reads matrix i for c_i. Where the indices step evenly
// (an unbroadcast batch, or one matrix for all) a device with
// GemmStridedBatched runs one call.
func GemmBatch(transA, transB bool, m, n, k int, a *Tensor, aIdx []int, b *Tensor, bIdx []int, beta float32, c *Tensor, batch int) {
	const op = "MatMul"
	kt := table(op, a, b, c)
	need(kt.Gemm != nil, op, c)
	for _, t := range []*Tensor{a, b, c} {
		if !t.IsContiguous() {
			panic(fmt.Sprintf("tensor: %s: GemmBatch on a view of shape %s", op, sh(t.shape)))
		}
	}
	if batch == 0 || m == 0 || n == 0 {
		return
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	at := func(idx []int, i int) int {
		if idx == nil {
			return i
		}
		return idx[i]
	}
	sa, okA := evenStep(aIdx, batch)
	sb, okB := evenStep(bIdx, batch)
	if kt.GemmStridedBatched != nil && okA && okB {
		kt.GemmStridedBatched(transA, transB, m, n, k, 1, from(a, at(aIdx, 0)*m*k), lda, sa*m*k,
			from(b, at(bIdx, 0)*k*n), ldb, sb*k*n, beta, c, n, m*n, batch)
		return
	}
	for i := range batch {
		kt.Gemm(transA, transB, m, n, k, 1, from(a, at(aIdx, i)*m*k), lda, from(b, at(bIdx, i)*k*n), ldb, beta, from(c, i*m*n), n)
	}
}

// evenStep reports whether idx (nil: 0, 1, 2, ...) steps evenly over its
// first n entries, and by how much.
func evenStep(idx []int, n int) (int, bool) {
	if idx == nil {
		return 1, true
	}
	if n < 2 {
		return 0, true
	}
	s := idx[1] - idx[0]
	for i := 2; i < n; i++ {
		if idx[i]-idx[i-1] != s {
			return 0, false
		}
	}
	return s, true
}
