//go:build cgo && !noblas

// Elementwise add/sub/mul/div for float32 and float64 (binary.go's binVV,
// binVS and binSV), written so that GCC vectorises them: Go compiles those
// loops to scalar SSE, and on large tensors (a ResNet-50's 25.6M parameters
// scaled, accumulated, ...) they ran at a fraction of memory bandwidth.
// target_clones builds AVX-512, AVX2 and baseline versions and picks one at
// load time by the CPU. Each element is one IEEE operation on the same two
// operands as the Go loop, so every clone gives the Go loop's bits.
//
// The loops take restrict pointers, so GCC vectorises them without run-time
// overlap checks; dst may equal an input exactly (in-place updates such as
// d += s), which gets its own loop, and any other overlap is refused (the
// return value 0) and left to the Go loops.

#pragma GCC optimize("O3")

#include <stdint.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define INL static inline __attribute__((always_inline))

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };

#define LOOP(EXPR) for (int64_t i = 0; i < n; i++) d[i] = EXPR;
#define SWITCH(A, B)                   \
	switch (op) {                      \
	case OP_ADD: LOOP((A) + (B)) break; \
	case OP_SUB: LOOP((A) - (B)) break; \
	case OP_MUL: LOOP((A) * (B)) break; \
	case OP_DIV: LOOP((A) / (B)) break; \
	}

// disjoint reports whether [a, a+na) and [b, b+nb) (in bytes) do not overlap.
static inline int disjoint(const void *a, int64_t na, const void *b, int64_t nb) {
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return x + (uintptr_t)na <= y || y + (uintptr_t)nb <= x;
}

#define DEFINE(T, S)                                                                                        \
	INL void vv_##S(int op, int64_t n, T *restrict d, const T *restrict x, const T *restrict y) { SWITCH(x[i], y[i]) } \
	INL void vv_dx_##S(int op, int64_t n, T *restrict d, const T *restrict y) { SWITCH(d[i], y[i]) }       \
	INL void vv_dy_##S(int op, int64_t n, T *restrict d, const T *restrict x) { SWITCH(x[i], d[i]) }       \
	INL void vs_##S(int op, int64_t n, T *restrict d, const T *restrict x, T s) { SWITCH(x[i], s) }          \
	INL void vs_dx_##S(int op, int64_t n, T *restrict d, T s) { SWITCH(d[i], s) }                          \
	INL void sv_##S(int op, int64_t n, T *restrict d, T s, const T *restrict y) { SWITCH(s, y[i]) }          \
	INL void sv_dy_##S(int op, int64_t n, T *restrict d, T s) { SWITCH(s, d[i]) }                          \
                                                                                                            \
	/* d[i] = x[i] op y[i] */                                                                               \
	CLONES int goddp_bin_vv_##S(int op, T *d, const T *x, const T *y, int64_t n) {                          \
		int64_t b = n * (int64_t)sizeof(T);                                                                 \
		int dx = d == x, dy = d == y;                                                                       \
		if (dx && dy) return 0;                                                                             \
		if (!dx && !disjoint(d, b, x, b)) return 0;                                                         \
		if (!dy && !disjoint(d, b, y, b)) return 0;                                                         \
		if (dx) vv_dx_##S(op, n, d, y);                                                                     \
		else if (dy) vv_dy_##S(op, n, d, x);                                                                \
		else vv_##S(op, n, d, x, y);                                                                        \
		return 1;                                                                                           \
	}                                                                                                       \
	/* d[i] = x[i] op s */                                                                                  \
	CLONES int goddp_bin_vs_##S(int op, T *d, const T *x, T s, int64_t n) {                                 \
		int64_t b = n * (int64_t)sizeof(T);                                                                 \
		if (d == x) vs_dx_##S(op, n, d, s);                                                                 \
		else if (disjoint(d, b, x, b)) vs_##S(op, n, d, x, s);                                              \
		else return 0;                                                                                      \
		return 1;                                                                                           \
	}                                                                                                       \
	/* d[i] = s op y[i] */                                                                                  \
	CLONES int goddp_bin_sv_##S(int op, T *d, T s, const T *y, int64_t n) {                                 \
		int64_t b = n * (int64_t)sizeof(T);                                                                 \
		if (d == y) sv_dy_##S(op, n, d, s);                                                                 \
		else if (disjoint(d, b, y, b)) sv_##S(op, n, d, s, y);                                              \
		else return 0;                                                                                      \
		return 1;                                                                                           \
	}

DEFINE(float, f32)
DEFINE(double, f64)
