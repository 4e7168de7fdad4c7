package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refGemm64 is the float64 triple loop every GEMM path is checked against.
func refGemm64(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float64
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}

func seq64(n int, seed float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Sin(seed + float64(i)*0.37)
	}
	return out
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func TestGemm(t *testing.T) {
	sizes := []struct{ m, n, k int }{
		{1, 1, 1}, {3, 4, 5}, {32, 1, 20}, {7, 9, 130}, {64, 10, 512}, {33, 65, 17}, {0, 3, 4}, {3, 4, 0},
	}
	type coef struct{ alpha, beta float64 }
	coefs := []coef{{1, 0}, {0.5, 1}, {-2, 0.25}, {0, 2}}
	for _, sz := range sizes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, cf := range coefs {
					name := fmt.Sprintf("m=%d,n=%d,k=%d,tA=%v,tB=%v,alpha=%v,beta=%v", sz.m, sz.n, sz.k, ta, tb, cf.alpha, cf.beta)
					t.Run(name, func(t *testing.T) {
						m, n, k := sz.m, sz.n, sz.k
						// Padded leading dimensions exercise the strides.
						lda, rowsA := k+3, m
						if ta {
							lda, rowsA = m+3, k
						}
						ldb, rowsB := n+2, k
						if tb {
							ldb, rowsB = k+2, n
						}
						ldc := n + 1
						a := seq64(rowsA*lda, 1)
						b := seq64(rowsB*ldb, 2)
						c := seq64(m*ldc, 3)
						want := append([]float64(nil), c...)
						refGemm64(ta, tb, m, n, k, cf.alpha, a, lda, b, ldb, cf.beta, want, ldc)

						got64 := append([]float64(nil), c...)
						Gemm64(ta, tb, m, n, k, cf.alpha, a, lda, b, ldb, cf.beta, got64, ldc)
						assert.InDeltaSlice(t, want, got64, 1e-9)

						got32 := to32(c)
						Gemm(ta, tb, m, n, k, float32(cf.alpha), to32(a), lda, to32(b), ldb, float32(cf.beta), got32, ldc)
						for i := range want {
							require.InDelta(t, want[i], float64(got32[i]), 1e-4*(1+float64(k)), "element %d", i)
						}
					})
				}
			}
		}
	}
}

func TestGemmEngineMatchesSmall(t *testing.T) {
	// The engine and the small-GEMM loops must agree above and below the cut.
	m, n, k := 40, 50, 60
	a, b := to32(seq64(m*k, 1)), to32(seq64(k*n, 2))
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			t.Run(fmt.Sprintf("tA=%v,tB=%v", ta, tb), func(t *testing.T) {
				lda, ldb := k, n
				if ta {
					lda = m
				}
				if tb {
					ldb = k
				}
				c1 := make([]float32, m*n)
				c2 := make([]float32, m*n)
				engineSgemm(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0, c1, n)
				smallGemm32(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0, c2, n)
				assert.InDeltaSlice(t, toF64(c2), toF64(c1), 1e-3)
			})
		}
	}
}

func toF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func TestGemmBadArgsPanic(t *testing.T) {
	cases := []struct {
		name string
		fn   func()
		msg  string
	}{
		{"short A", func() {
			Gemm(false, false, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
		}, "Gemm: A has 3 elements"},
		{"bad ldb", func() {
			Gemm(false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 1, 0, make([]float32, 4), 2)
		}, "Gemm: ldB=1"},
		{"negative", func() { Gemm64(false, false, -1, 2, 2, 1, nil, 2, nil, 2, 0, nil, 2) }, "Gemm64: negative dimension"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r)
				assert.Contains(t, fmt.Sprint(r), tc.msg)
			}()
			tc.fn()
		})
	}
}

func TestThreadsFromEnv(t *testing.T) {
	cases := []struct {
		goddp, omp string
		want       int
	}{
		{"", "", 0}, {"3", "", 3}, {"", "2", 2}, {"1", "4", 1}, {"x", "2", 2}, {"0", "", 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("goddp=%q,omp=%q", tc.goddp, tc.omp), func(t *testing.T) {
			t.Setenv("GODDP_NUM_THREADS", tc.goddp)
			t.Setenv("OMP_NUM_THREADS", tc.omp)
			assert.Equal(t, tc.want, ThreadsFromEnv())
		})
	}
	assert.NotEmpty(t, BLASName())
}

// Small products (attention's per head) run on the AVX-512 register kernel
// on an AMD CPU with AVX-512 (engineUsesSmall): every
// transpose combination, strided operands and result, alpha, beta 0 over a
// result full of NaN and beta 1 over one that holds values, rows that do
// not fill a block, against float64 sums.
func TestGemmSmallShapes(t *testing.T) {
	rng := NewRNG(6)
	shapes := []struct{ m, n, k int }{{64, 64, 32}, {64, 32, 64}, {37, 48, 5}, {3, 16, 128}, {9, 64, 1}}
	for _, sh := range shapes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, beta := range []float32{0, 1} {
					m, n, k := sh.m, sh.n, sh.k
					lda, ldb, ldc := k+3, n+5, n+7 // strided, as attention's q, k and v are
					if ta {
						lda = m + 3
					}
					if tb {
						ldb = k + 5
					}
					rowsA, rowsB := m, k
					if ta {
						rowsA = k
					}
					if tb {
						rowsB = n
					}
					a, b := Randn(rng, Float32, rowsA*lda).F32(), Randn(rng, Float32, rowsB*ldb).F32()
					c := Randn(rng, Float32, m*ldc).F32()
					if beta == 0 {
						for i := range c {
							c[i] = float32(math.NaN())
						}
					}
					c0 := append([]float32(nil), c...)
					const alpha = 0.75
					Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					for i := range m {
						for j := range n {
							var acc float64
							for kk := range k {
								ia, ib := i*lda+kk, kk*ldb+j
								if ta {
									ia = kk*lda + i
								}
								if tb {
									ib = j*ldb + kk
								}
								av, bv := a[ia], b[ib]
								acc += float64(av) * float64(bv)
							}
							want := alpha * acc
							if beta != 0 {
								want += float64(c0[i*ldc+j])
							}
							require.InDelta(t, want, float64(c[i*ldc+j]), 1e-5*float64(k)+1e-5, "%v ta=%v tb=%v beta=%v c[%d][%d]", sh, ta, tb, beta, i, j)
						}
						for j := n; j < ldc; j++ { // the padding of a strided result is not written
							require.Equal(t, math.Float32bits(c0[i*ldc+j]), math.Float32bits(c[i*ldc+j]), "%v padding c[%d][%d]", sh, i, j)
						}
					}
				}
			}
		}
	}
	t.Logf("register kernel for 64x64x32: %v (an AMD CPU with AVX-512)", engineUsesSmall(64, 64, 32, 0))
	require.False(t, engineUsesSmall(64, 80, 32, 0), "n not a multiple of 16")
	require.False(t, engineUsesSmall(2048, 64, 64, 0), "too large")
	require.False(t, engineUsesSmall(64, 64, 32, 0.5), "beta other than 0 or 1")
}
