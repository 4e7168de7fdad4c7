//go:build cgo && !noblas

// Small float32 products on AVX-512 registers: attention's per-head
// products (64×64×32 with Bᵀ, 64×32×64 plain and with Aᵀ at a GPT's
// sizes). oneDNN's sgemm pays a fixed cost per call (argument checks,
// kernel dispatch, packing) that such a product, 262 KFLOP, does not
// amortise: in a GPT's steps these ran at 57-113 GFLOPS, against 180-200
// for its large products on the same core.
//
// C (m×n) = alpha·op(A)·op(B) + beta·C, beta 0 or 1, for n a multiple of
// 16 up to 64 and k up to 128: a block of rows keeps its whole row of C in
// 16 vector accumulators (4 rows of 64 columns, 8 of 32 or 16 of 16) while
// k runs; op(B)'s row kk is loaded once per block and step, op(A)'s
// elements are broadcast. op(B) with B transposed is first copied as k×n
// (at most 32 KB). Each element of C is one float32 sum over k in order,
// then scaled by alpha: no other rounding.

// O3: GCC unrolls the constant-bound loops over rows and vectors only
// there; at O2 the accumulators lived on the stack and the kernel ran at a
// third of oneDNN's rate.
#pragma GCC optimize("O3")

#include "engine.h"

#include <immintrin.h>
#include <stdint.h>

#include "transpose16.h"

enum { smallMaxN = 64, smallMaxK = 128, smallMaxM = 512 };

// block computes rows i0..i0+R-1 of C, summing over kk in [k0, k); R and
// NV (vectors per row) are constants at every call, so the accumulators
// stay in registers.
__attribute__((target("avx512f"), always_inline)) static inline void
small_block(const int R, const int NV, int ta, int64_t k0, int64_t k, float alpha, const float *a, int64_t lda,
            const float *bp, int64_t ldbp, float beta, float *c, int64_t ldc, int64_t i0) {
	__m512 acc[16][4];
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++)
			acc[r][v] = _mm512_setzero_ps();
	for (int64_t kk = k0; kk < k; kk++) {
		__m512 bv[4];
		for (int v = 0; v < NV; v++)
			bv[v] = _mm512_loadu_ps(bp + kk * ldbp + 16 * v);
		for (int r = 0; r < R; r++) {
			float x = ta ? a[kk * lda + i0 + r] : a[(i0 + r) * lda + kk];
			__m512 ab = _mm512_set1_ps(x);
			for (int v = 0; v < NV; v++)
				acc[r][v] = _mm512_fmadd_ps(ab, bv[v], acc[r][v]);
		}
	}
	__m512 al = _mm512_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) {
			float *p = c + (i0 + r) * ldc + 16 * v;
			__m512 y = _mm512_mul_ps(acc[r][v], al);
			if (beta != 0)
				y = _mm512_add_ps(y, _mm512_loadu_ps(p));
			_mm512_storeu_ps(p, y);
		}
}

#define ROWS(R, NV)                                                                                        \
	for (; i + (R) <= m; i += (R))                                                                         \
		small_block((R), (NV), ta, 0, k, alpha, a, lda, bp, ldbp, beta, c, ldc, i);                        \
	for (; i < m; i++)                                                                                     \
		small_block(1, (NV), ta, 0, k, alpha, a, lda, bp, ldbp, beta, c, ldc, i);

// pack_b returns op(B) as k×n rows: B itself, or Bᵀ copied into bt.
__attribute__((target("avx512f"))) static const float *pack_b(int tb, int64_t n, int64_t k, const float *b,
                                                               int64_t ldb, float *bt, int64_t *ldbp) {
	*ldbp = ldb;
	if (!tb)
		return b;
	int64_t k16 = k / 16 * 16;
	for (int64_t j = 0; j < n; j += 16)
		for (int64_t kk = 0; kk < k16; kk += 16)
			transpose16(b + j * ldb + kk, ldb, bt + kk * n + j, n);
	for (int64_t kk = k16; kk < k; kk++)
		for (int64_t j = 0; j < n; j++)
			bt[kk * n + j] = b[j * ldb + kk];
	*ldbp = n;
	return bt;
}

__attribute__((target("avx512f"))) static void small_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k,
                                                             float alpha, const float *a, int64_t lda,
                                                             const float *b, int64_t ldb, float beta, float *c,
                                                             int64_t ldc) {
	float bt[smallMaxK * smallMaxN] __attribute__((aligned(64)));
	int64_t ldbp;
	const float *bp = pack_b(tb, n, k, b, ldb, bt, &ldbp);
	int64_t i = 0;
	switch (n / 16) {
	case 1:
		ROWS(16, 1)
		break;
	case 2:
		ROWS(8, 2)
		break;
	case 3:
		ROWS(5, 3)
		break;
	default:
		ROWS(4, 4)
		break;
	}
}

// Causal attention's products skip what its mask makes zero or unused
// (goddp_sgemm_small_tri), row block by row block, with beta 0:
//   - small_tri_cols (S = q·kᵀ, dP = dO·vᵀ, m = n): row i needs columns
//     j <= i only; a block of rows gets the 16-column vectors up to its
//     last row's diagonal, and the columns past them are not written (the
//     causal softmax and its backward neither read them nor keep them);
//   - small_tri_kend (o = p·v, dq = ds·k, m = k): row i of op(A) is zero
//     past column i, so a block's sums stop after its last row;
//   - small_tri_kstart (dv = pᵀ·dO, dk = dsᵀ·q, m = k): row j of op(A) is
//     zero before column j, so a block's sums start at its first row.
// The terms skipped are products with an exact zero, which leave a float32
// sum that starts at +0 unchanged, so every written element has the bits
// of the full product (for finite operands: 0·Inf would have made a NaN).
enum { small_tri_cols = 1, small_tri_kend = 2, small_tri_kstart = 3 };

#define TRI_ROWS(R, NV, HI)                                                                                       \
	for (; i + (R) <= (HI); i += (R))                                                                              \
		small_block((R), (NV), ta, mode == small_tri_kstart ? i : 0, mode == small_tri_kend ? i + (R) : k, alpha, a,  \
		            lda, bp, ldbp, 0, c, ldc, i);                                                                   \
	for (; i < (HI); i++)                                                                                          \
		small_block(1, (NV), ta, mode == small_tri_kstart ? i : 0, mode == small_tri_kend ? i + 1 : k, alpha, a, lda, \
		            bp, ldbp, 0, c, ldc, i);

// TRI_BLOCKS runs ROWS (TRI_ROWS, BF_ROWS) up to row HI with the row block
// that keeps NV vectors of columns in registers (at most 16 accumulators).
#define TRI_BLOCKS(ROWS, NV, HI)                                                                                       \
	switch (NV) {                                                                                                  \
	case 1:                                                                                                        \
		ROWS(16, 1, HI)                                                                                            \
		break;                                                                                                     \
	case 2:                                                                                                        \
		ROWS(8, 2, HI)                                                                                             \
		break;                                                                                                     \
	case 3:                                                                                                        \
		ROWS(5, 3, HI)                                                                                             \
		break;                                                                                                     \
	default:                                                                                                       \
		ROWS(4, 4, HI)                                                                                             \
		break;                                                                                                     \
	}

// TRI_RUN computes every row of C with ROWS, from row i = 0 (mode, m and n
// in scope). Mode cols runs bands of 16 rows: band v needs v+1 vectors of
// columns.
#define TRI_RUN(ROWS)                                                                                                  \
	if (mode == small_tri_cols) {                                                                                  \
		for (int64_t band = 0; band * 16 < m; band++) {                                                            \
			int64_t hi = band * 16 + 16 < m ? band * 16 + 16 : m;                                                  \
			TRI_BLOCKS(ROWS, band < n / 16 ? band + 1 : n / 16, hi)                                                \
		}                                                                                                          \
	} else {                                                                                                       \
		TRI_BLOCKS(ROWS, n / 16, m)                                                                                \
	}

__attribute__((target("avx512f"))) static void small_tri_avx512(int mode, int ta, int tb, int64_t m, int64_t n,
                                                                 int64_t k, float alpha, const float *a, int64_t lda,
                                                                 const float *b, int64_t ldb, float *c,
                                                                 int64_t ldc) {
	float bt[smallMaxK * smallMaxN] __attribute__((aligned(64)));
	int64_t ldbp;
	const float *bp = pack_b(tb, n, k, b, ldb, bt, &ldbp);
	int64_t i = 0;
	TRI_RUN(TRI_ROWS)
}

int goddp_small_shape(int64_t m, int64_t n, int64_t k, float beta) {
	return m >= 1 && m <= smallMaxM && n >= 16 && n <= smallMaxN && n % 16 == 0 && k >= 1 && k <= smallMaxK &&
	       (beta == 0 || beta == 1);
}

void goddp_sgemm_small(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
	small_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int goddp_small_tri_shape(int mode, int64_t m, int64_t n, int64_t k) {
	if (!goddp_small_shape(m, n, k, 0))
		return 0;
	return mode == small_tri_cols ? m == n : (mode == small_tri_kend || mode == small_tri_kstart) && m == k;
}

void goddp_sgemm_small_tri(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
	small_tri_avx512(mode, ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

// bfloat16 causal products (goddp_sgemm_small_tri_bf16): the same skips on
// AVX512-BF16's vdpbf16ps, which multiplies a pair of bfloat16 values along
// k by another pair and adds both products to a float32 lane: half the
// instructions of the float32 kernel, whose 64×64 heads ran at about half
// the rate of a bf16 GPT's large products. The operands are float32 and are
// rounded to bfloat16 (ties to even, subnormals read as zero) while they
// are packed, so the caller makes no rounded copies; or they are bfloat16
// already (a16, b16: an operand that serves several products, rounded once
// into half the bytes), and then a row-major op(A) needs no packing at all
// and op(B) only moves pairs:
//   - op(A) as pairs along k, at ap[i·asi + p·asp] (p = kk/2): row-major
//     rows (A as stored, asp 1), or, for Aᵀ, rows 2p and 2p+1 of A
//     interleaved (asi 1), which serves the transpose without moving pairs;
//   - op(B) as k/2 rows of n pairs (op(B)[2p][j], op(B)[2p+1][j]): rows 2p
//     and 2p+1 of B interleaved, or, for Bᵀ, B's rows rounded to pairs and
//     transposed as 32-bit elements (transpose16).
// An odd k ends in a pair with a zero. Each product of two bfloat16 values
// is exact in float32; the instruction adds a pair's two products to the
// sum one after the other, so the sums differ from a float32 GEMM over the
// rounded operands by float32 roundings only.
enum { bfPairsMax = smallMaxK / 2, bfMaxM = smallMaxK }; // m = n <= 64 for cols, m = k <= 128 otherwise

// bf_pairs rounds n floats at x (zero past n) to 32 bfloat16 values, 16
// pairs in order.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline __m512i bf_pairs(const float *x, int64_t n) {
	__mmask16 lo = n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
	__mmask16 hi = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
	return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + 16), _mm512_maskz_loadu_ps(lo, x));
}

// bf_rows writes rows×cols floats (row stride ld) as rows of pairs, ldp
// (a multiple of 16) pairs apart, zero past cols.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void bf_rows(const float *x, int64_t ld, int64_t rows,
                                                                          int64_t cols, uint32_t *dst, int64_t ldp) {
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < ldp * 2; c += 32)
			_mm512_storeu_si512((void *)(dst + r * ldp + c / 2), bf_pairs(x + r * ld + c, cols - c));
}

// bf_interleave writes pairs (x[2p][j], x[2p+1][j]) for p < ceil(rows/2),
// j < cols, to dst[p·ldd + j]: two rows of x (stride ld) rounded into one
// vector (row 2p in the low half) whose 16-bit halves are then interleaved;
// a missing last row reads as zero. ldd is a multiple of 16.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
bf_interleave(const float *x, int64_t ld, int64_t rows, int64_t cols, uint32_t *dst, int64_t ldd) {
	const __m512i zip = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
	                                     21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	for (int64_t p = 0; 2 * p < rows; p++) {
		const float *r0 = x + 2 * p * ld, *r1 = r0 + ld;
		int odd = 2 * p + 1 < rows;
		for (int64_t j = 0; j < cols; j += 16) {
			__mmask16 mk = cols - j >= 16 ? 0xffff : (__mmask16)((1u << (cols - j)) - 1);
			__m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(odd ? mk : 0, r1 + j),
			                                         _mm512_maskz_loadu_ps(mk, r0 + j));
			_mm512_storeu_si512((void *)(dst + p * ldd + j), _mm512_permutexvar_epi16(zip, v));
		}
	}
}

// bf_rows16 is bf_rows for bfloat16 values x.
__attribute__((target("avx512f,avx512bw"))) static void bf_rows16(const uint16_t *x, int64_t ld, int64_t rows,
                                                                  int64_t cols, uint32_t *dst, int64_t ldp) {
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < ldp * 2; c += 32) {
			int64_t n = cols - c;
			__mmask32 mk = n >= 32 ? 0xffffffffu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
			_mm512_storeu_si512((void *)(dst + r * ldp + c / 2), _mm512_maskz_loadu_epi16(mk, x + r * ld + c));
		}
}

// bf_interleave16 is bf_interleave for bfloat16 values x.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
bf_interleave16(const uint16_t *x, int64_t ld, int64_t rows, int64_t cols, uint32_t *dst, int64_t ldd) {
	for (int64_t p = 0; 2 * p < rows; p++) {
		const uint16_t *r0 = x + 2 * p * ld, *r1 = r0 + ld;
		int odd = 2 * p + 1 < rows;
		for (int64_t j = 0; j < cols; j += 16) {
			__mmask16 mk = cols - j >= 16 ? 0xffff : (__mmask16)((1u << (cols - j)) - 1);
			__m512i e0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, r0 + j));
			__m512i e1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(odd ? mk : 0, r1 + j));
			_mm512_storeu_si512((void *)(dst + p * ldd + j), _mm512_or_si512(e0, _mm512_slli_epi32(e1, 16)));
		}
	}
}

// bf_block is small_block on pairs: rows i0..i0+R-1 of C summed over pairs
// p in [p0, p1).
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
bf_block(const int R, const int NV, const uint32_t *ap, int64_t asi, int64_t asp, int64_t p0, int64_t p1,
         float alpha, const uint32_t *bp, int64_t ldbp, float *c, int64_t ldc, int64_t i0) {
	__m512 acc[16][4];
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++)
			acc[r][v] = _mm512_setzero_ps();
	for (int64_t p = p0; p < p1; p++) {
		__m512i bv[4];
		for (int v = 0; v < NV; v++)
			bv[v] = _mm512_loadu_si512((const void *)(bp + p * ldbp + 16 * v));
		for (int r = 0; r < R; r++) {
			__m512i ab = _mm512_set1_epi32((int)ap[(i0 + r) * asi + p * asp]);
			for (int v = 0; v < NV; v++)
				acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)ab, (__m512bh)bv[v]);
		}
	}
	__m512 al = _mm512_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++)
			_mm512_storeu_ps(c + (i0 + r) * ldc + 16 * v, _mm512_mul_ps(acc[r][v], al));
}

// A block's pairs: kstart from its first row's kk (i/2 covers kk = i-1 at
// most, a zero of op(A)), kend up to its last row's.
#define BF_P0(I) (mode == small_tri_kstart ? (I) / 2 : 0)
#define BF_P1(I, R) (mode == small_tri_kend ? ((I) + (R) + 1) / 2 : k2)
#define BF_ROWS(R, NV, HI)                                                                                   \
	for (; i + (R) <= (HI); i += (R))                                                                     \
		bf_block((R), (NV), ap, asi, asp, BF_P0(i), BF_P1(i, R), alpha, bp, n, c, ldc, i);                \
	for (; i < (HI); i++)                                                                                 \
		bf_block(1, (NV), ap, asi, asp, BF_P0(i), BF_P1(i, 1), alpha, bp, n, c, ldc, i);

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
small_tri_bf16(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a, int a16,
               int64_t lda, const void *b, int b16, int64_t ldb, float *c, int64_t ldc) {
	uint32_t apk[bfMaxM * bfPairsMax] __attribute__((aligned(64)));
	uint32_t bpk[bfPairsMax * smallMaxN] __attribute__((aligned(64)));
	uint32_t bt[smallMaxN * bfPairsMax] __attribute__((aligned(64)));
	int64_t k2 = (k + 1) / 2, k2p = (k + 31) / 32 * 16; // pairs, and pairs to a whole vector
	const uint32_t *ap = apk;
	int64_t asi, asp;
	if (ta) { // op(A)[i][kk] = A[kk][i]
		if (a16)
			bf_interleave16(a, lda, k, m, apk, bfMaxM);
		else
			bf_interleave(a, lda, k, m, apk, bfMaxM);
		asi = 1, asp = bfMaxM;
	} else if (a16 && lda % 2 == 0 && k % 2 == 0 && (uintptr_t)a % 4 == 0) { // A's rows are its pairs
		ap = a;
		asi = lda / 2, asp = 1;
	} else {
		if (a16)
			bf_rows16(a, lda, m, k, apk, k2p);
		else
			bf_rows(a, lda, m, k, apk, k2p);
		asi = k2p, asp = 1;
	}
	if (tb) { // op(B)[kk][j] = B[j][kk]: B's rows as pairs, transposed
		const uint32_t *rows = bt;
		int64_t ldr = k2p;
		if (b16 && ldb % 2 == 0 && k % 32 == 0 && (uintptr_t)b % 4 == 0)
			rows = b, ldr = ldb / 2; // whole vectors of pairs in place
		else if (b16)
			bf_rows16(b, ldb, n, k, bt, k2p);
		else
			bf_rows(b, ldb, n, k, bt, k2p);
		for (int64_t j = 0; j < n; j += 16)
			for (int64_t p = 0; p < k2p; p += 16)
				transpose16((const float *)(rows + j * ldr + p), ldr, (float *)(bpk + p * n + j), n);
	} else if (b16) {
		bf_interleave16(b, ldb, k, n, bpk, n);
	} else {
		bf_interleave(b, ldb, k, n, bpk, n);
	}
	const uint32_t *bp = bpk;
	int64_t i = 0;
	TRI_RUN(BF_ROWS)
}

void goddp_sgemm_small_tri_bf16(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                                const void *a, int a16, int64_t lda, const void *b, int b16, int64_t ldb, float *c,
                                int64_t ldc) {
	small_tri_bf16(mode, ta, tb, m, n, k, alpha, a, a16, lda, b, b16, ldb, c, ldc);
}
