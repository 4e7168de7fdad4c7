package tensor

// The small-GEMM kernels: plain loops for products too small to be worth a
// call into the BLAS engine (Linear(20,1) at batch 32 is 640 multiply-adds).
// They are also the reference the engine is tested against.

func scaleC[T float](m, n int, beta T, c []T, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row) // BLAS semantics: beta=0 overwrites, NaNs in C included
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// dot returns x·y over len(x) elements with four independent accumulators,
// so the loop is bound by loads rather than by the add latency.
func dot[T float](x, y []T) T {
	y = y[:len(x)]
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy does y += a*x over len(y) elements.
func axpy[T float](y []T, a T, x []T) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

func smallGemm[T float](transA, transB bool, m, n, k int, alpha T, a []T, lda int,
	b []T, ldb int, beta T, c []T, ldc int) {
	scaleC(m, n, beta, c, ldc)
	switch {
	case !transA && !transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			for p, av := range a[i*lda : i*lda+k] {
				axpy(crow, alpha*av, b[p*ldb:p*ldb+n])
			}
		}
	case !transA && transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			arow := a[i*lda : i*lda+k]
			for j := range crow {
				crow[j] += alpha * dot(arow, b[j*ldb:j*ldb+k])
			}
		}
	case transA && !transB:
		for p := 0; p < k; p++ {
			brow := b[p*ldb : p*ldb+n]
			for i, av := range a[p*lda : p*lda+m] {
				axpy(c[i*ldc:i*ldc+n], alpha*av, brow)
			}
		}
	default:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			for j := range crow {
				brow := b[j*ldb : j*ldb+k]
				var s T
				for p, bv := range brow {
					s += a[p*lda+i] * bv
				}
				crow[j] += alpha * s
			}
		}
	}
}

func smallGemm32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	smallGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func smallGemm64(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	smallGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
