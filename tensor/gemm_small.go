package tensor

// The small-GEMM kernels: plain loops for products too small to be worth a
// call into the BLAS engine (Linear(20,1) at batch 32 is 640 multiply-adds).
// They are also the reference the engine is tested against.

func scaleC32(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

func scaleC64(m, n int, beta float64, c []float64, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

func smallGemm32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleC32(m, n, beta, c, ldc)
	switch {
	case !transA && !transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			arow := a[i*lda : i*lda+k]
			for p, av := range arow {
				s := alpha * av
				brow := b[p*ldb : p*ldb+n]
				for j, bv := range brow {
					crow[j] += s * bv
				}
			}
		}
	case !transA && transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			arow := a[i*lda : i*lda+k]
			for j := range crow {
				brow := b[j*ldb : j*ldb+k]
				var s float32
				for p, av := range arow {
					s += av * brow[p]
				}
				crow[j] += alpha * s
			}
		}
	case transA && !transB:
		for p := 0; p < k; p++ {
			acol := a[p*lda : p*lda+m]
			brow := b[p*ldb : p*ldb+n]
			for i, av := range acol {
				s := alpha * av
				crow := c[i*ldc : i*ldc+n]
				for j, bv := range brow {
					crow[j] += s * bv
				}
			}
		}
	default:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			for j := range crow {
				brow := b[j*ldb : j*ldb+k]
				var s float32
				for p, bv := range brow {
					s += a[p*lda+i] * bv
				}
				crow[j] += alpha * s
			}
		}
	}
}

func smallGemm64(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	scaleC64(m, n, beta, c, ldc)
	switch {
	case !transA && !transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			arow := a[i*lda : i*lda+k]
			for p, av := range arow {
				s := alpha * av
				brow := b[p*ldb : p*ldb+n]
				for j, bv := range brow {
					crow[j] += s * bv
				}
			}
		}
	case !transA && transB:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			arow := a[i*lda : i*lda+k]
			for j := range crow {
				brow := b[j*ldb : j*ldb+k]
				var s float64
				for p, av := range arow {
					s += av * brow[p]
				}
				crow[j] += alpha * s
			}
		}
	case transA && !transB:
		for p := 0; p < k; p++ {
			acol := a[p*lda : p*lda+m]
			brow := b[p*ldb : p*ldb+n]
			for i, av := range acol {
				s := alpha * av
				crow := c[i*ldc : i*ldc+n]
				for j, bv := range brow {
					crow[j] += s * bv
				}
			}
		}
	default:
		for i := 0; i < m; i++ {
			crow := c[i*ldc : i*ldc+n]
			for j := range crow {
				brow := b[j*ldb : j*ldb+k]
				var s float64
				for p, bv := range brow {
					s += a[p*lda+i] * bv
				}
				crow[j] += alpha * s
			}
		}
	}
}
