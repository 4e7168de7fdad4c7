// The C side of the default GEMM engine (see engine.c and blas_cgo.go).

#ifndef GODDP_ENGINE_H
#define GODDP_ENGINE_H

#include <stdint.h>

// goddp_set_threads sets how many threads one GEMM may use (n >= 1).
void goddp_set_threads(int n);

// goddp_threads reports the count set by goddp_set_threads (1 by default).
int goddp_threads(void);

// goddp_sgemm and goddp_dgemm compute C = alpha*op(A)*op(B) + beta*C for
// row-major matrices, op(A) m×k, op(B) k×n, C m×n. They return 0, or a
// nonzero status from the kernel library for arguments it rejected.
int goddp_sgemm(int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                float *c, int64_t ldc);
int goddp_dgemm(int transA, int transB, int64_t m, int64_t n, int64_t k, double alpha,
                const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                double *c, int64_t ldc);

// goddp_small_shape reports whether goddp_sgemm_small takes a product of
// this shape: m up to 512, n a multiple of 16 up to 64, k up to 128, beta
// 0 or 1. goddp_sgemm_small computes it on AVX-512 registers (the CPU must
// have AVX-512F); goddp_sgemm sends it there on AMD CPUs with AVX-512
// (gemm_small_kernels.c).
int goddp_small_shape(int64_t m, int64_t n, int64_t k, float beta);
void goddp_sgemm_small(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

// goddp_sgemm_small_tri is goddp_sgemm_small (beta 0) for causal
// attention's products, skipping what the mask makes zero or unused: mode 1
// computes only the columns j <= i of each row i (more at most, up to the
// next 16-column vector; the rest is not written), mode 2 sums row i over
// kk <= i only (op(A) zero past its diagonal), mode 3 over kk >= i only
// (zero before it). goddp_small_tri_shape reports whether it takes the
// shape (goddp_small_shape's, with m = n for mode 1 and m = k otherwise).
// goddp_sgemm_tri is the engine's entry: the small kernel where the CPU
// runs it (goddp_sgemm_uses_small), else the full product.
int goddp_small_tri_shape(int mode, int64_t m, int64_t n, int64_t k);
void goddp_sgemm_small_tri(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc);
int goddp_sgemm_tri(int mode, int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc);
// goddp_sgemm_small_tri_bf16 is goddp_sgemm_small_tri with op(A) and op(B)
// as bfloat16, multiplied in pairs on AVX512-BF16 (the CPU must have it,
// and AVX-512BW and VL): float32 sums of exact products. An operand whose
// flag (a16, b16) is set holds bfloat16 values (uint16_t, lda and ldb in
// elements); a float32 one is rounded (ties to even) as it is packed.
// goddp_sgemm_tri_bf16 runs it and returns 0 where goddp_sgemm_uses_tri_bf16
// says so for the shape on this CPU (AMD with AVX-512 and AVX512-BF16,
// goddp_small_tri_shape's shapes), and otherwise returns 1 and leaves C
// alone.
void goddp_sgemm_small_tri_bf16(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                                const void *a, int a16, int64_t lda, const void *b, int b16, int64_t ldb, float *c,
                                int64_t ldc);
int goddp_sgemm_tri_bf16(int mode, int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha,
                         const void *a, int a16, int64_t lda, const void *b, int b16, int64_t ldb, float *c,
                         int64_t ldc);
int goddp_sgemm_uses_tri_bf16(int mode, int64_t m, int64_t n, int64_t k);
// goddp_sgemm_uses_small reports whether goddp_sgemm takes that path for
// a shape on this CPU. Tests use it.
int goddp_sgemm_uses_small(int64_t m, int64_t n, int64_t k, float beta);

// goddp_sgemm_kernel names the kernel library goddp_sgemm picks for a
// shape: 1 for oneDNN, 0 for OpenBLAS. Tests use it.
int goddp_sgemm_kernel(int transA, int transB, int64_t m, int64_t n, int64_t k);

// goddp_blas_core returns the kernel set OpenBLAS runs ("" when the library
// cannot say), with the one it had picked for itself, whether the engine
// re-initialised it, whether it is still a pre-AVX2 set on an AVX2 CPU, and
// whether it is an AVX2 set on a CPU with full-width AVX-512 (in either
// case float32 products all go to oneDNN). See blas_core_fix and
// wide_avx512 in engine.c.
const char *goddp_blas_core(const char **detected, int *reinit, int *slow, int *narrow);

// goddp_conv_t is one 2-d convolution over NCHW float32 arrays: input
// [n, c, h, w], weight [o, c/groups, kh, kw], output [n, o, oh, ow]; padding
// top, left, bottom, right; dilation as torch counts it (1: none).
typedef struct {
	int64_t n, c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, groups, oh, ow;
	int64_t bf16; // 1: the inputs of each product as bfloat16, float32 accumulation and results
} goddp_conv_t;

// goddp_conv_fwd computes y = conv(x, w) + b (b may be NULL),
// goddp_conv_bwd_data dx = the input gradient for dy (overwritten), and
// goddp_conv_bwd_weights dw and db (NULL: none) for x and dy (overwritten),
// on the calling thread alone. They return 0, 1 where oneDNN has no
// implementation for the shape (the caller falls back), or -1 on failure.
int goddp_conv_fwd(const goddp_conv_t *g, const float *x, const float *w, const float *b, float *y);
// goddp_conv_fwd_relu is goddp_conv_fwd followed by y = max(0, y), fused.
int goddp_conv_fwd_relu(const goddp_conv_t *g, const float *x, const float *w, const float *b, float *y);
int goddp_conv_bwd_data(const goddp_conv_t *g, const float *w, const float *dy, float *dx);
int goddp_conv_bwd_weights(const goddp_conv_t *g, const float *x, const float *dy, float *dw, float *db);

// goddp_conv_impl names the oneDNN implementation a call of kind (0 fwd,
// 1 bwd data, 2 bwd weights) would run, "" for none. Tests and benchmarks.
const char *goddp_conv_impl(int kind, int bias, const goddp_conv_t *g);

// goddp_gemm_bf16_mixed is goddp_sgemm with A and B as bfloat16 and the
// products accumulated in float32: autocast's bf16 matmul. An operand whose
// flag (a16, b16) is set holds bfloat16 values (uint16_t) and is used as
// it is; a float32 one is rounded to bfloat16 first (round to nearest
// even), as goddp_to_bf16 rounds. goddp_to_bf16_add_rows rounds a rows×cols
// contiguous matrix and adds its rows to d as goddp_add_rows_f32 does (the
// same sums). goddp_linear_bf16_mixed is goddp_linear_f32 in bfloat16
// (autocast's linear: the bias in the bf16 matmul's epilogue), x and w
// flagged so. goddp_bf16_native reports whether the CPU computes bf16
// products natively (AVX512-BF16); without it the result is the same but
// runs at float32 speed or slower. goddp_round_bf16 rounds n floats to bf16
// values.
int goddp_bf16_native(void);
void goddp_round_bf16(const float *x, float *y, int64_t n);
void goddp_to_bf16(const float *x, uint16_t *y, int64_t n);
void goddp_to_bf16_add_rows(const float *x, uint16_t *y, float *d, int64_t rows, int64_t cols);
// goddp_gelu_with_grad_to_bf16 writes GELU(x) rounded to bfloat16 to y and
// GELU'(x) to grad: goddp_gelu_with_grad_f32, then goddp_to_bf16, to the bit.
void goddp_gelu_with_grad_to_bf16(uint16_t *y, float *grad, const float *x, int64_t n);
// goddp_gelu_with_grad_f32 is gelu_kernels.c's GELU with its derivative,
// which goddp_gelu_with_grad_to_bf16 runs block by block.
void goddp_gelu_with_grad_f32(float *dst, float *grad, const float *src, int64_t n);
// goddp_to_bf16_mul_add_rows is goddp_to_bf16_add_rows of x ⊙ s (each
// product rounded to float32 first): the same bits as multiplying, then
// goddp_to_bf16_add_rows.
void goddp_to_bf16_mul_add_rows(const float *x, const float *s, uint16_t *y, float *d, int64_t rows, int64_t cols);
int goddp_gemm_bf16_mixed(int transA, int transB, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                          int a16, int64_t lda, const void *b, int b16, int64_t ldb, float beta, float *c,
                          int64_t ldc);
int goddp_linear_bf16_mixed(int64_t m, int64_t n, int64_t k, const void *x, int x16, int64_t ldx, const void *w,
                            int w16, int64_t ldw, const float *bias, float *y, int64_t ldy);

// goddp_bf16_slice runs one slice through oneDNN's bf16 matmul on the
// calling thread: 0 done, 1 no implementation for the shape, -1 failure.
// goddp_bf16_impl names the implementation for a shape ("" for none).
int goddp_bf16_slice(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a, int64_t lda,
                     const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc);
const char *goddp_bf16_impl(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc);

// goddp_matmul_slice is goddp_bf16_slice for A and B float32 (f32 = 1) or
// bfloat16 (f32 = 0), with an optional bias row (NULL: none) added to
// every row of C in the primitive's epilogue.
int goddp_matmul_slice(int f32, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                       int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc, const float *bias);

// goddp_linear_f32 computes y = x·wᵀ + bias for row-major x m×k, w n×k and
// y m×n (bias NULL: none), a float32 Linear's forward. Where the engine
// runs the shape through oneDNN, the bias is added in oneDNN's matmul
// epilogue; elsewhere y's rows start as the bias and sgemm adds the
// product (beta = 1). goddp_linear_fused reports which (1: the epilogue).
int goddp_linear_f32(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, int64_t ldw,
                     const float *bias, float *y, int64_t ldy);
int goddp_linear_fused(int64_t m, int64_t n, int64_t k);

#endif
