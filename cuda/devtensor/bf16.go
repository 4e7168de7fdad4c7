package devtensor

import "github.com/goddp/goddp/tensor"

// BF16Launcher is a Launcher with a GEMM on bfloat16 operands (cuBLAS's
// cublasGemmEx with A and B CUDA_R_16BF, C CUDA_R_32F and float32
// compute): a and b hold bfloat16 values (2 bytes each, at byte offsets
// aOff and bOff, row strides lda and ldb in elements), c float32 ones, in
// the row-major convention of Sgemm. GemmBF16 returns false, having queued
// nothing, when the device behind the launcher has no such call; devtensor
// then widens the operands back to float32 and runs Sgemm, which computes
// the same products (see gemmBF16).
type BF16Launcher interface {
	GemmBF16(transA, transB bool, m, n, k int, alpha float32, a Mem, aOff, lda int,
		b Mem, bOff, ldb int, beta float32, c Mem, cOff, ldc int) bool
}

// gemmBF16 is tensor.Kernels.GemmBF16: op(A) and op(B) are narrowed to
// bfloat16 by f32_to_bf16 (round to nearest even, bit for bit
// internal/half, which the CPU's GemmBF16 rounds with), then multiplied
// with float32 accumulation. A BF16Launcher multiplies the bfloat16
// operands itself (tensor cores on a GPU). Otherwise (sim) they are widened
// back to float32, exactly, and go through Sgemm: the product of two
// bfloat16 values is exact in float32 (8+8 significant bits), so that is
// the same computation as a bf16 GEMM with float32 accumulation, up to the
// order of the sums.
func (d *Device) gemmBF16(transA, transB bool, m, n, k int, alpha float32, a *tensor.Tensor, lda int,
	b *tensor.Tensor, ldb int, beta float32, c *tensor.Tensor, ldc int) {
	am, ao := d.mem("bf16 gemm", a)
	bm, bo := d.mem("bf16 gemm", b)
	cm, co := d.mem("bf16 gemm", c)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		// Nothing to round: C = beta*C, which Sgemm does.
		d.l.Sgemm(transA, transB, m, n, k, alpha, am, ao, lda, bm, bo, ldb, beta, cm, co, ldc)
		return
	}
	// The elements each operand's rows span, row stride included: the
	// narrowed copy keeps the operand's layout, so lda and ldb still hold.
	spanA, spanB := span(transA, m, k, lda), span(transB, k, n, ldb)
	a16, b16 := d.scratch(spanA, 2), d.scratch(spanB, 2)
	d.launch("f32_to_bf16", grid(spanA), a16.mem.Ptr(), am.Ptr()+uint64(ao), i64(spanA))
	d.launch("f32_to_bf16", grid(spanB), b16.mem.Ptr(), bm.Ptr()+uint64(bo), i64(spanB))
	if bl, ok := d.l.(BF16Launcher); ok &&
		bl.GemmBF16(transA, transB, m, n, k, alpha, a16.mem, 0, lda, b16.mem, 0, ldb, beta, cm, co, ldc) {
		// The scratch blocks go back to the cache now, to be reused by
		// work queued after this GEMM on the same stream.
		a16.Release()
		b16.Release()
		return
	}
	a32, b32 := d.scratch(spanA, 4), d.scratch(spanB, 4)
	d.launch("bf16_to_f32", grid(spanA), a32.mem.Ptr(), a16.mem.Ptr(), i64(spanA))
	d.launch("bf16_to_f32", grid(spanB), b32.mem.Ptr(), b16.mem.Ptr(), i64(spanB))
	d.l.Sgemm(transA, transB, m, n, k, alpha, a32.mem, 0, lda, b32.mem, 0, ldb, beta, cm, co, ldc)
	a16.Release()
	b16.Release()
	a32.Release()
	b32.Release()
}

// span is the number of elements an operand of rows×cols after op (its
// transpose stored when trans) covers at row stride ld.
func span(trans bool, rows, cols, ld int) int {
	if trans {
		rows, cols = cols, rows
	}
	return (rows-1)*ld + cols
}

// scratch is device memory for n elements of size bytes (2 or 4), from the
// caching allocator as a tensor's storage is.
func (d *Device) scratch(n, size int) *storage {
	s, err := d.Alloc((n*size + 3) / 4)
	if err != nil {
		// Out of device memory even after emptying the cache: as for the
		// op's own output (tensor.MustZerosOn), a panic naming it.
		panic(err.Error())
	}
	return s.(*storage)
}
