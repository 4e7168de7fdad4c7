//go:build cgo && !noblas

// The fused attention of cpu_flash_attention.go in one C call per head, on
// AVX-512 registers, for float32 and a head size D that is a multiple of 16
// (GPT-2's 64). The tiled path runs each tile's products through Gemm
// (a cgo call and the engine's dispatch each, OpenBLAS's or oneDNN's
// packing of 64×128×64 operands) and its row work in other calls; at
// B 2, T 1024, H 12, D 64 on one core its products ran at 50-93 GFLOPS
// against 122 for n = 1024 GEMMs. Here the tiles are those of the tiled
// path (query blocks of FQ rows, key tiles of FK = flashTileK keys: the
// forward's running maximum moves every FK keys, the bf16 contract shared
// with goddp/cuda/kernels' flash_attn_fwd_f32), the operands are packed
// once into the layouts the products read, and each product is a run of
// register blocks (FR rows × up to 4 vectors of 16 columns, 24
// accumulators) whose epilogue does the row work while the block is in
// registers: the backward's probabilities e**(s - lse) and scores'
// gradient p ⊙ (dp - D), the forward's rescaling of the output rows.
//
// Every product is C (+)= op(A)·B with op(A)'s elements broadcast and B's
// rows loaded as vectors, so B must be row-major along the output's
// columns: K and V are transposed into panels of 64 keys (D×64,
// contiguous) for S = Q·Kᵀ and dP = dO·Vᵀ; Pᵀ and dSᵀ are read in place
// (broadcasts of a column). Causal blocks skip what the mask zeroes: the
// 16-column vectors past a row block's last visible key, and the terms of
// a sum whose factor from P or dS is zero. Each element's sum runs over k
// in order in float32 from +0, so a skipped term (a product with an exact
// zero) changes no bit.
//
// e**x is fastexp.h's, in double precision on 8 lanes (the same
// polynomial and clamp as flash_attention_kernels.c's flash_exp).
//
// Where the time goes, B 2, T 1024, H 12, D 64 causal on one core of the
// shared Xeon (2026-11-29, rdtsc around each phase, one quiet run): the
// seven products 11-15 ms each, at about the rate of an n = 1024 GEMM;
// e**x about 25 ms in all (some 40 vector uops per 16 scores on the two
// 512-bit ports, in the forward two thirds of a product's FMAs); the
// copies of strided rows (q and dy per query block and key tile, k and v
// per tile, D's row sums, dk and dv out) about 15 ms. Forward and
// backward together ran at 0.6-0.7 of the n = 1024 GEMM's rate in the
// same process. What is left: a float32 e**x (cheaper, but not of
// fastexp.h's accuracy), and whole-head copies of q and dy (the backward
// re-reads their rows per key tile; the copies would take the scratch past
// TestFlashSelfAttentionPeakBelowProbabilities's bound at T 512, D 16).
//
// Scratch per worker: the forward keeps the head's K panels and V rows
// (2·T·D floats) and one query block's tiles; the backward one key tile's
// K rows, K and V panels and dK, dV sums, one query block's q and dy, the
// tile of probabilities that becomes the scores' gradient in place (and
// its bf16 rounding beside it), and D (T floats).

#pragma GCC optimize("O3", "no-trapping-math")

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fastexp.h"
#include "transpose16.h"

// FK is the key tile (cpu_flash_attention.go's flashTileK, the bf16
// contract), FQ the query block, FR the rows of a register block: 6 rows
// of 4 vectors are 24 of the 32 registers, with 4 for a row of B; the
// broadcasts are memory operands.
enum { FK = 128, FQ = 64, FR = 6, FP = 64, FMAXD = 256 };

#define AVX512 __attribute__((target("avx512f")))
#define INLINE __attribute__((always_inline)) static inline

int goddp_flash_fused_ok(int64_t d) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && d >= 16 && d <= FMAXD && d % 16 == 0;
}

// ---- vector helpers ----

// exp_pd is goddp_exp on 8 doubles, which the caller has clamped to
// flash_exp's [-104, 89].
AVX512 INLINE __m512d exp_pd(__m512d y) {
	const __m512d log2e = _mm512_set1_pd(1.44269504088896340736), ln2 = _mm512_set1_pd(0.693147180559945309417);
	const __m512d shifter = _mm512_set1_pd(0x1.8p52 + 1023);
	__m512d kf = _mm512_fmadd_pd(y, log2e, shifter);
	__m512d s = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(kf), 52));
	__m512d r = _mm512_fnmadd_pd(_mm512_sub_pd(kf, shifter), ln2, y);
	__m512d r2 = _mm512_mul_pd(r, r);
	__m512d p01 = _mm512_fmadd_pd(_mm512_set1_pd(0.5000000046680004), r, _mm512_set1_pd(1.0000000000312237));
	__m512d p23 = _mm512_fmadd_pd(_mm512_set1_pd(0.041666354325215704), r, _mm512_set1_pd(0.16666666249338286));
	__m512d p45 = _mm512_fmadd_pd(_mm512_set1_pd(0.0013941015328067642), r, _mm512_set1_pd(0.008333402933959448));
	__m512d p456 = _mm512_fmadd_pd(r2, _mm512_set1_pd(0.00019841247011729895), p45);
	__m512d m = _mm512_fmadd_pd(r2, p23, p01);
	m = _mm512_fmadd_pd(_mm512_mul_pd(r2, r2), p456, m);
	m = _mm512_mul_pd(r, m);
	return _mm512_fmadd_pd(s, m, s);
}

// exp_ps is e**x of 16 floats, each clamped (in float: the bounds are
// floats, and max and min with the constant first keep a NaN), through
// exp_pd and rounded back.
AVX512 INLINE __m512 exp_ps(__m512 x) {
	x = _mm512_min_ps(_mm512_set1_ps(89), _mm512_max_ps(_mm512_set1_ps(-104), x));
	__m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
	__m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
	__m256 l8 = _mm512_cvtpd_ps(exp_pd(lo)), h8 = _mm512_cvtpd_ps(exp_pd(hi));
	return _mm512_castpd_ps(
	    _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(l8)), _mm256_castps_pd(h8), 1));
}

// exp1 is flash_exp: one float through the same clamp and polynomial.
static inline float exp1(float v) {
	double y = v;
	y = y < -104 ? -104 : y;
	y = y > 89 ? 89 : y;
	return (float)goddp_exp(y);
}

// round_ps rounds 16 floats to bfloat16 values as rownorm_kernels.c's
// round_bf16_span does (to nearest even; a NaN stays a quiet NaN).
AVX512 INLINE __m512 round_ps(__m512 x) {
	__m512i u = _mm512_castps_si512(x), hi = _mm512_set1_epi32((int)0xffff0000u);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), hi);
	__m512i q = _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x400000)), hi);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
	                                        _mm512_set1_epi32(0x7f800000));
	return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, r, q));
}

AVX512 INLINE __mmask16 tail_mask(int64_t n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

// copy_row writes n (a multiple of 16) floats of x to y, rounded to
// bfloat16 with bf16.
AVX512 INLINE void copy_row(float *y, const float *x, int64_t n, int bf16) {
	for (int64_t j = 0; j < n; j += 16) {
		__m512 v = _mm512_loadu_ps(x + j);
		_mm512_storeu_ps(y + j, bf16 ? round_ps(v) : v);
	}
}

AVX512 INLINE void zero_span(float *y, int64_t n) {
	for (int64_t j = 0; j < n; j += 16) _mm512_mask_storeu_ps(y + j, tail_mask(n - j), _mm512_setzero_ps());
}

// Rows of q, k, v, dy, y and dqkv are 3·H·D or H·D floats apart, each on
// a page of its own at GPT-2's sizes, where the hardware prefetchers do
// not follow: the packing loops ask for the rows PF ahead, and each block
// of work asks for the next block's rows (into L2: a block's products run
// between) while it computes. At B 2, T 1024, H 12, D 64 the row copies
// and D's row sums took 22 of 165 ms without this.
enum { PF = 8 };

// prefetch_rows asks for rows rows of d floats (stride ld): for reading
// into L2 (the next block's operands), or for writing.
AVX512 INLINE void prefetch_rows(const float *x, int64_t ld, int64_t rows, int64_t d, int write) {
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < d; j += 16) {
			if (write)
				__builtin_prefetch(x + r * ld + j, 1, 3);
			else
				__builtin_prefetch(x + r * ld + j, 0, 2);
		}
}

// pack_rows copies rows rows of d (row stride ldx) contiguous into y,
// rounded with bf16.
AVX512 static void pack_rows(float *y, const float *x, int64_t ldx, int64_t rows, int64_t d, int bf16) {
	for (int64_t r = 0; r < rows; r++) {
		if (r + PF < rows) prefetch_rows(x + (r + PF) * ldx, ldx, 1, d, 0);
		copy_row(y + r * d, x + r * ldx, d, bf16);
	}
}

// pack_panels writes keys 0..keys-1 of x (rows of d, stride ldx; rows at
// or past avail read as zero) transposed into panels of FP keys: panel p
// holds dst[p·d·FP + c·FP + j] = x[p·FP + j][c]. keys is a multiple of FP;
// tmp holds 16 rows of d.
AVX512 static void pack_panels(float *dst, const float *x, int64_t ldx, int64_t avail, int64_t keys, int64_t d,
                               int bf16, float *tmp) {
	for (int64_t g = 0; g < keys; g += 16) {
		for (int64_t r = 0; r < 16; r++) {
			if (g + r + PF < avail) prefetch_rows(x + (g + r + PF) * ldx, ldx, 1, d, 0);
			if (g + r < avail)
				copy_row(tmp + r * d, x + (g + r) * ldx, d, bf16);
			else
				zero_span(tmp + r * d, d);
		}
		float *panel = dst + g / FP * d * FP + g % FP;
		for (int64_t c = 0; c < d; c += 16) transpose16(tmp + c, d, panel + c * FP, FP);
	}
}

// ---- register blocks ----

// What a block's epilogue does with its sums acc (row i, column j):
enum {
	EP_SCALE, // c = alpha·acc (the forward's scores)
	EP_PROB,  // c = e**(alpha·acc - rv[i]) where visible, else 0, and with bf16 pr = c rounded
	          // (the backward's probabilities)
	EP_DS,    // c = c·(acc - rv[i]) where visible, else 0, rounded with bf16: c held the
	          // probabilities and gets the scores' gradient
	EP_ACC,   // c = alpha·acc (first) or c + alpha·acc
	EP_OUT,   // c = acc (first) or c·rv[i] + acc (the forward's output, rescaled)
};

typedef struct {
	float *c;
	int64_t ldc;
	float alpha;
	const float *rv; // a value per row: lse, D, or the rescaling factors
	float *pr;       // EP_PROB with bf16: the probabilities rounded (stride ldc)
	int first, bf16;
	// EP_PROB, EP_DS: column j of row i is visible when j < ncols and, if
	// causal, j <= i + diag. The row blocks of every kind skip the columns
	// past their last row's visible ones.
	int causal;
	int64_t diag, ncols;
} epi_t;

// block computes rows i0..i0+R-1 and columns c0..c0+16·NV-1 of C over
// kk in [kb, ke): acc = Σ op(A)[i][kk]·B[kk][j - c0], op(A)[i][kk] at
// a[i·lda + kk], or at a[kk·lda + i] with ta. R, NV and kind are
// constants at every call, so the sums stay in registers.
AVX512 INLINE void block(const int R, const int NV, const int kind, int ta, const float *a, int64_t lda,
                         const float *b, int64_t ldb, int64_t kb, int64_t ke, int64_t i0, int64_t c0,
                         const epi_t *e) {
	__m512 acc[FR][4];
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
	for (int64_t kk = kb; kk < ke; kk++) {
		__m512 bv[4];
		for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + kk * ldb + 16 * v);
		for (int r = 0; r < R; r++) {
			__m512 ab = _mm512_set1_ps(ta ? a[kk * lda + i0 + r] : a[(i0 + r) * lda + kk]);
			for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(ab, bv[v], acc[r][v]);
		}
	}
	const __m512 al = _mm512_set1_ps(e->alpha);
	const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
	for (int r = 0; r < R; r++) {
		int64_t i = i0 + r;
		float *crow = e->c + i * e->ldc + c0;
		__m512 rv = _mm512_setzero_ps();
		if (kind == EP_PROB || kind == EP_DS || kind == EP_OUT) rv = _mm512_set1_ps(e->rv[i]);
		for (int v = 0; v < NV; v++) {
			__m512 x = acc[r][v];
			float *p = crow + 16 * v;
			if (kind == EP_SCALE) {
				_mm512_storeu_ps(p, _mm512_mul_ps(x, al));
			} else if (kind == EP_PROB || kind == EP_DS) {
				int64_t col = c0 + 16 * v, lim = e->ncols - col;
				if (e->causal && i + e->diag + 1 - col < lim) lim = i + e->diag + 1 - col;
				__mmask16 vis = lim >= 16 ? 0xffff
				                : lim <= 0 ? 0
				                           : _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32((int)lim));
				if (kind == EP_PROB) {
					__m512 pv = _mm512_maskz_mov_ps(vis, exp_ps(_mm512_sub_ps(_mm512_mul_ps(x, al), rv)));
					_mm512_storeu_ps(p, pv);
					if (e->bf16) _mm512_storeu_ps(e->pr + i * e->ldc + c0 + 16 * v, round_ps(pv));
				} else {
					__m512 ds = _mm512_maskz_mov_ps(vis, _mm512_mul_ps(_mm512_loadu_ps(p), _mm512_sub_ps(x, rv)));
					_mm512_storeu_ps(p, e->bf16 ? round_ps(ds) : ds);
				}
			} else if (kind == EP_ACC) {
				__m512 y = _mm512_mul_ps(x, al);
				_mm512_storeu_ps(p, e->first ? y : _mm512_add_ps(_mm512_loadu_ps(p), y));
			} else { // EP_OUT
				_mm512_storeu_ps(p, e->first ? x : _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(p), rv), x));
			}
		}
	}
}

// DISPATCH calls CALL(R, NV) for runtime R (1 to FR) and NV (1 to 4).
#define DISPATCH_R(R, CALL)                                                                                        \
	case (R) * 4 + 0: CALL(R, 1); break;                                                                       \
	case (R) * 4 + 1: CALL(R, 2); break;                                                                       \
	case (R) * 4 + 2: CALL(R, 3); break;                                                                       \
	case (R) * 4 + 3: CALL(R, 4); break;
#define DISPATCH(R, NV, CALL)                                                                                      \
	switch ((R) * 4 + (NV) - 1) {                                                                                  \
		DISPATCH_R(1, CALL)                                                                                        \
		DISPATCH_R(2, CALL)                                                                                        \
		DISPATCH_R(3, CALL)                                                                                        \
		DISPATCH_R(4, CALL)                                                                                        \
		DISPATCH_R(5, CALL)                                                                                        \
		DISPATCH_R(6, CALL)                                                                                        \
	}

// The range of kk a row block i0..i0+R-1 sums over:
enum {
	K_ALL,  // [0, k)
	K_UPTO, // [0, min(k, i0 + R + off)): row i reads kk <= i + off (o = p·v, dq = ds·k)
	K_FROM, // [max(0, i0 + off), k): row i reads kk >= i + off (dv = pᵀ·dy, dk = dsᵀ·q)
};

// rows_* compute rows [0, m) and columns [0, n) (a multiple of 16) of
// op(A)·B (B's rows ldb apart), each row block over its range kr of
// [0, k), in chunks of 64 columns (the vectors that stay in registers).
#define ROWS_CALL(R, NV) block((R), (NV), KIND, ta, a, lda, b + c0, ldb, kb, ke, i, c0, e)
#define ROWS_FN(NAME, KIND_)                                                                                       \
	AVX512 static void NAME(int64_t m, int64_t n, int kr, int64_t k, int64_t off, int ta, const float *a,        \
	                        int64_t lda, const float *b, int64_t ldb, const epi_t *e) {                            \
		enum { KIND = KIND_ };                                                                                     \
		for (int64_t c0 = 0; c0 < n; c0 += 64) {                                                                   \
			int nv = (int)((n - c0) / 16 < 4 ? (n - c0) / 16 : 4);                                                 \
			for (int64_t i = 0; i < m; i += FR) {                                                                  \
				int R = (int)(m - i < FR ? m - i : FR);                                                            \
				int64_t kb = 0, ke = k;                                                                            \
				if (kr == K_UPTO) {                                                                                \
					int64_t x = i + R + off;                                                                       \
					ke = x < 0 ? 0 : x < k ? x : k;                                                                \
				} else if (kr == K_FROM) {                                                                         \
					int64_t x = i + off;                                                                           \
					kb = x < 0 ? 0 : x < k ? x : k;                                                                \
				}                                                                                                  \
				DISPATCH(R, nv, ROWS_CALL)                                                                         \
			}                                                                                                      \
		}                                                                                                          \
	}

ROWS_FN(rows_acc, EP_ACC)
ROWS_FN(rows_out, EP_OUT)

// tri_* compute the m×ncols scores' kind (e->ncols, the mask in e) of
// A (m rows of d, stride lda) against a key tile held as panels at b (d
// rows of FP keys each), row block by row block up to the vectors that
// hold the block's last visible column; with zero the rest of each row up
// to ncols (rounded up to 16) is written as zeros.
#define TRI_CALL(R, NV) block((R), (NV), KIND, 0, a, lda, b + c0 / FP * d * FP, FP, 0, d, i, c0, e)
#define TRI_FN(NAME, KIND_)                                                                                        \
	AVX512 static void NAME(int64_t m, int64_t d, const float *a, int64_t lda, const float *b, const epi_t *e,   \
	                        int zero) {                                                                            \
		enum { KIND = KIND_ };                                                                                     \
		int64_t width = (e->ncols + 15) / 16 * 16;                                                                 \
		for (int64_t i = 0; i < m; i += FR) {                                                                      \
			int R = (int)(m - i < FR ? m - i : FR);                                                                \
			int64_t need = e->ncols;                                                                               \
			if (e->causal && i + R + e->diag < need) need = i + R + e->diag;                                       \
			need = need <= 0 ? 0 : (need + 15) / 16 * 16;                                                          \
			for (int64_t c0 = 0; c0 < need; c0 += FP) {                                                            \
				int nv = (int)((need - c0) / 16 < 4 ? (need - c0) / 16 : 4);                                       \
				DISPATCH(R, nv, TRI_CALL)                                                                          \
			}                                                                                                      \
			for (int64_t r = i; zero && r < i + R; r++) {                                                          \
				zero_span(e->c + r * e->ldc + need, width - need);                                                 \
				if (KIND == EP_PROB && e->bf16) zero_span(e->pr + r * e->ldc + need, width - need);                \
			}                                                                                                      \
		}                                                                                                          \
	}

TRI_FN(tri_scale, EP_SCALE)
TRI_FN(tri_prob, EP_PROB)
TRI_FN(tri_ds, EP_DS)

// ---- scratch ----

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

// The scratch of one head's forward (backward): its sizes in floats, one
// after another, each a multiple of 16 floats (64 bytes); the base is
// aligned up to 64 bytes, which the 16 floats of slack allow for.
static int64_t fwd_parts(int64_t t, int64_t d, int64_t *sz) {
	int64_t tp = (t + FP - 1) / FP * FP;
	int64_t s[] = {tp * d, t * d, FQ * d, FQ * FK, FQ * d, FQ, FQ, FQ, 16 * d}; // kt v qb s o mx l cr tmp
	int64_t n = 16;
	for (int i = 0; i < 9; i++) n += (sz[i] = up16(s[i]));
	return n;
}

// The backward's probabilities become the scores' gradient in place (ps);
// with bf16 the value gradient reads them rounded from pb.
static int64_t bwd_parts(int64_t t, int64_t d, int bf16, int64_t *sz) {
	int64_t s[] = {FK * d, d * FK, d * FK, FQ * d, FQ * d, FQ * FK, bf16 ? FQ * FK : 0, FK * d, FK * d, t};
	// kr kt vt qb gb ps pb dkb dvb dd
	int64_t n = 16;
	for (int i = 0; i < 10; i++) n += (sz[i] = up16(s[i]));
	return n;
}

int64_t goddp_flash_fused_scratch(int backward, int bf16, int64_t t, int64_t d) {
	int64_t sz[10];
	return backward ? bwd_parts(t, d, bf16, sz) : fwd_parts(t, d, sz);
}

static void carve(float *scratch, const int64_t *sz, int n, float **out) {
	float *p = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
	for (int i = 0; i < n; i++) out[i] = p, p += sz[i];
}

// ---- forward ----

// softmax turns the m×n scores s (row stride FK) of queries q0.. against
// keys k0.. into e**(s - running max), zero past each row's visible keys,
// and updates the rows' running maximum mx and sum l; cr gets each row's
// rescaling e**(old max - new max) of its output so far (1 for a row that
// sees none of these keys). With bf16 the probabilities are rounded after
// the sum. flash_attention_kernels.c's goddp_flash_fwd_tile_f32 on
// vectors.
AVX512 static void softmax(float *s, int64_t m, int64_t n, int64_t q0, int64_t k0, int causal, int bf16, float *mx,
                           float *l, float *cr) {
	for (int64_t r = 0; r < m; r++) {
		float *row = s + r * FK;
		int64_t v = n;
		if (causal) {
			int64_t x = q0 + r - k0 + 1;
			v = x < 0 ? 0 : x < n ? x : n;
		}
		if (v == 0) {
			zero_span(row, n);
			cr[r] = 1;
			continue;
		}
		__m512 vm = _mm512_set1_ps(-INFINITY);
		for (int64_t j = 0; j < v; j += 16)
			vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(v - j), row + j));
		float old = mx[r], nm = _mm512_reduce_max_ps(vm);
		nm = old > nm ? old : nm;
		__m512 sum = _mm512_setzero_ps(), vn = _mm512_set1_ps(nm);
		for (int64_t j = 0; j < v; j += 16) {
			__mmask16 mk = tail_mask(v - j);
			__m512 e = _mm512_maskz_mov_ps(mk, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, row + j), vn)));
			sum = _mm512_add_ps(sum, e);
			_mm512_storeu_ps(row + j, e);
		}
		float c = old == -INFINITY ? 0 : exp1(old - nm);
		l[r] = l[r] * c + _mm512_reduce_add_ps(sum);
		mx[r] = nm;
		cr[r] = c;
		if (bf16)
			for (int64_t j = 0; j < v; j += 16) _mm512_storeu_ps(row + j, round_ps(_mm512_loadu_ps(row + j)));
		int64_t w = up16(v);
		zero_span(row + w, n - w);
	}
}

// goddp_flash_fwd_head_f32 is one head's forward: q, k and v are its T
// rows of d (stride ldx, qkv's), y its output rows (stride ldy), lse its
// T log-sum-exps; scratch holds goddp_flash_fused_scratch(0, bf16, t, d)
// floats.
AVX512 void goddp_flash_fwd_head_f32(const float *q, const float *k, const float *v, int64_t ldx, float *y,
                                     int64_t ldy, float *lse, int64_t t, int64_t d, float scale, int causal,
                                     int bf16, float *scratch) {
	int64_t sz[9];
	float *p[9];
	fwd_parts(t, d, sz);
	carve(scratch, sz, 9, p);
	float *kt = p[0], *vp = p[1], *qb = p[2], *s = p[3], *o = p[4], *mx = p[5], *l = p[6], *cr = p[7], *tmp = p[8];
	pack_panels(kt, k, ldx, t, (t + FP - 1) / FP * FP, d, bf16, tmp);
	pack_rows(vp, v, ldx, t, d, bf16);
	for (int64_t q0 = 0; q0 < t; q0 += FQ) {
		int64_t m = t - q0 < FQ ? t - q0 : FQ;
		int64_t kend = causal ? q0 + m : t;
		pack_rows(qb, q + q0 * ldx, ldx, m, d, bf16);
		if (q0 + FQ < t) prefetch_rows(q + (q0 + FQ) * ldx, ldx, t - q0 - FQ < FQ ? t - q0 - FQ : FQ, d, 0);
		for (int64_t r = 0; r < m; r++) mx[r] = -INFINITY, l[r] = 0;
		for (int64_t k0 = 0; k0 < kend; k0 += FK) {
			int64_t n = kend - k0 < FK ? kend - k0 : FK;
			epi_t es = {.c = s, .ldc = FK, .alpha = scale, .causal = causal, .diag = q0 - k0, .ncols = n};
			tri_scale(m, d, qb, d, kt + k0 / FP * d * FP, &es, 0);
			softmax(s, m, n, q0, k0, causal, bf16, mx, l, cr);
			epi_t eo = {.c = o, .ldc = d, .rv = cr, .first = k0 == 0};
			rows_out(m, d, causal ? K_UPTO : K_ALL, n, q0 - k0, 0, s, FK, vp + k0 * d, d, &eo);
		}
		for (int64_t r = 0; r < m; r++) {
			if (r + PF < m) prefetch_rows(y + (q0 + r + PF) * ldy, ldy, 1, d, 1);
			__m512 inv = _mm512_set1_ps(1 / l[r]);
			for (int64_t j = 0; j < d; j += 16)
				_mm512_storeu_ps(y + (q0 + r) * ldy + j, _mm512_mul_ps(_mm512_loadu_ps(o + r * d + j), inv));
			lse[q0 + r] = mx[r] + logf(l[r]);
		}
	}
}

// ---- backward ----

// goddp_flash_bwd_head_f32 is one head's backward (FlashAttention-2's: key
// tiles outside, query blocks inside, the probabilities recomputed from
// lse): q, k, v and their gradients dq, dk, dv are rows of d with qkv's
// stride ldx, dy and y with ldy; scratch holds
// goddp_flash_fused_scratch(1, bf16, t, d) floats.
AVX512 void goddp_flash_bwd_head_f32(const float *q, const float *k, const float *v, int64_t ldx, const float *dy,
                                     const float *y, int64_t ldy, const float *lse, float *dq, float *dk, float *dv,
                                     int64_t t, int64_t d, float scale, int causal, int bf16, float *scratch) {
	int64_t sz[10];
	float *p[10];
	bwd_parts(t, d, bf16, sz);
	carve(scratch, sz, 10, p);
	float *kr = p[0], *kt = p[1], *vt = p[2], *qb = p[3], *gb = p[4], *ps = p[5], *pb = p[6], *dkb = p[7],
	      *dvb = p[8], *dd = p[9], *tmp = ps; // tmp: 16 rows of d while the tile is packed
	// D = Σ dy·y row by row (FlashAttention-2's D_i, each row's Σ_j dp·p),
	// with dy as the products see it.
	for (int64_t i = 0; i < t; i++) {
		if (i + PF < t) {
			prefetch_rows(dy + (i + PF) * ldy, ldy, 1, d, 0);
			prefetch_rows(y + (i + PF) * ldy, ldy, 1, d, 0);
		}
		__m512 acc = _mm512_setzero_ps();
		for (int64_t j = 0; j < d; j += 16) {
			__m512 g = _mm512_loadu_ps(dy + i * ldy + j);
			acc = _mm512_fmadd_ps(bf16 ? round_ps(g) : g, _mm512_loadu_ps(y + i * ldy + j), acc);
		}
		dd[i] = _mm512_reduce_add_ps(acc);
	}
	for (int64_t k0 = 0; k0 < t; k0 += FK) {
		int64_t n = t - k0 < FK ? t - k0 : FK;
		pack_rows(kr, k + k0 * ldx, ldx, n, d, bf16);
		pack_panels(kt, kr, d, n, FK, d, 0, tmp);
		pack_panels(vt, v + k0 * ldx, ldx, n, FK, d, bf16, tmp);
		int64_t qstart = causal ? k0 / FQ * FQ : 0, nk = t - k0 - FK < FK ? t - k0 - FK : FK; // the next tile's keys
		for (int64_t q0 = qstart; q0 < t; q0 += FQ) {
			int64_t m = t - q0 < FQ ? t - q0 : FQ;
			pack_rows(qb, q + q0 * ldx, ldx, m, d, bf16);
			pack_rows(gb, dy + q0 * ldy, ldy, m, d, bf16);
			// The next query block's rows (and its rows of dq, which this
			// tile's dq product updates), and a slice of the next key tile's.
			int64_t mn = t - q0 - FQ < FQ ? t - q0 - FQ : FQ, j0 = (q0 - qstart) / FQ * 16;
			if (mn > 0) {
				prefetch_rows(q + (q0 + FQ) * ldx, ldx, mn, d, 0);
				prefetch_rows(dy + (q0 + FQ) * ldy, ldy, mn, d, 0);
				prefetch_rows(dq + (q0 + FQ) * ldx, ldx, mn, d, 0);
			}
			if (j0 < nk) {
				prefetch_rows(k + (k0 + FK + j0) * ldx, ldx, nk - j0 < 16 ? nk - j0 : 16, d, 0);
				prefetch_rows(v + (k0 + FK + j0) * ldx, ldx, nk - j0 < 16 ? nk - j0 : 16, d, 0);
			}
			epi_t ep = {.c = ps, .ldc = FK, .alpha = scale, .rv = lse + q0, .pr = pb, .bf16 = bf16, .causal = causal,
			            .diag = q0 - k0, .ncols = n};
			tri_prob(m, d, qb, d, kt, &ep, 1);
			int first = q0 == qstart, kfrom = causal ? K_FROM : K_ALL;
			epi_t ev = {.c = dvb, .ldc = d, .alpha = 1, .first = first};
			rows_acc(n, d, kfrom, m, k0 - q0, 1, bf16 ? pb : ps, FK, gb, d, &ev);
			epi_t eds = {.c = ps, .ldc = FK, .alpha = 1, .rv = dd + q0, .bf16 = bf16, .causal = causal,
			             .diag = q0 - k0, .ncols = n};
			tri_ds(m, d, gb, d, vt, &eds, 1);
			epi_t ek = {.c = dkb, .ldc = d, .alpha = scale, .first = first};
			rows_acc(n, d, kfrom, m, k0 - q0, 1, ps, FK, qb, d, &ek);
			// Every query block meets key tile 0 first: dq starts there.
			epi_t eq = {.c = dq + q0 * ldx, .ldc = ldx, .alpha = scale, .first = k0 == 0};
			rows_acc(m, d, causal ? K_UPTO : K_ALL, n, q0 - k0, 0, ps, FK, kr, d, &eq);
		}
		for (int64_t j = 0; j < n; j++) {
			if (j + PF < n) {
				prefetch_rows(dk + (k0 + j + PF) * ldx, ldx, 1, d, 1);
				prefetch_rows(dv + (k0 + j + PF) * ldx, ldx, 1, d, 1);
			}
			copy_row(dk + (k0 + j) * ldx, dkb + j * d, d, 0);
			copy_row(dv + (k0 + j) * ldx, dvb + j * d, d, 0);
		}
	}
}
