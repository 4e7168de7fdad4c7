package sim

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Sgemm enqueues C = alpha*op(A)*op(B) + beta*C on row-major float32
// matrices in device memory (op(A) m×k, op(B) k×n, C m×n; ld* are row
// strides in elements), with goddp's CPU engine in place of cuBLAS:
// tensor.Gemm, whose conventions these are. goddp/cuda's MatMul maps the
// same row-major call onto column-major cuBLAS.
func (s *Stream) Sgemm(transA, transB bool, m, n, k int, alpha float32, a *Buffer, lda int,
	b *Buffer, ldb int, beta float32, c *Buffer, ldc int) {
	s.Enqueue("sgemm", func() error {
		for _, x := range []*Buffer{a, b, c} {
			if x.p == nil {
				return fmt.Errorf("sgemm: %w (buffer freed)", ErrClosed)
			}
		}
		tensor.Gemm(transA, transB, m, n, k, alpha, a.F32(), lda, b.F32(), ldb, beta, c.F32(), ldc)
		return nil
	})
}
