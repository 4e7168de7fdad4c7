//go:build cgo && !noblas

package tensor

// The default engine: OpenBLAS (Debian's libopenblas-dev) and, for the
// float32 shapes where it is faster, oneDNN (libdnnl-dev), both run one
// thread per kernel call and spread over threads by engine.c's pool. Build
// with -tags nodnnl to leave oneDNN out (OpenBLAS kernels only, same pool).

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lopenblas
#cgo !nodnnl CFLAGS: -DGODDP_DNNL
#cgo !nodnnl LDFLAGS: -ldnnl -lgomp
#include "engine.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// engineCgo reports that engine calls are cgo calls (see schedhint.go).
const engineCgo = true

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func engineSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	rc := C.goddp_sgemm(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(a))), C.int64_t(lda),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(b))), C.int64_t(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc))
	if rc != 0 {
		panic(engineError("Gemm", int(rc), m, n, k))
	}
}

// engineUsesSmall reports whether engineSgemm runs this shape on the
// AVX-512 register kernel (gemm_small_kernels.c).
func engineUsesSmall(m, n, k int, beta float32) bool {
	return C.goddp_sgemm_uses_small(C.int64_t(m), C.int64_t(n), C.int64_t(k), C.float(beta)) != 0
}

// engineLinearFused reports whether engineLinear32 adds the bias in
// oneDNN's matmul epilogue for this shape (see linear_fused in engine.c).
func engineLinearFused(m, n, k int) bool {
	return C.goddp_linear_fused(C.int64_t(m), C.int64_t(n), C.int64_t(k)) != 0
}

// engineLinear computes y = x·wᵀ + b, y [n, out], through the engine's
// goddp_linear_f32 (the bias in oneDNN's epilogue).
func engineLinear(y, x, w, b []float32, n, in, out int) {
	rc := C.goddp_linear_f32(C.int64_t(n), C.int64_t(out), C.int64_t(in),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(x))), C.int64_t(in),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(w))), C.int64_t(in),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(b))), (*C.float)(unsafe.Pointer(unsafe.SliceData(y))), C.int64_t(out))
	if rc != 0 {
		panic(engineError("LinearF32", int(rc), n, out, in))
	}
}

func engineDgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) {
	rc := C.goddp_dgemm(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k), C.double(alpha),
		(*C.double)(unsafe.Pointer(unsafe.SliceData(a))), C.int64_t(lda),
		(*C.double)(unsafe.Pointer(unsafe.SliceData(b))), C.int64_t(ldb), C.double(beta),
		(*C.double)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc))
	if rc != 0 {
		panic(engineError("Gemm64", int(rc), m, n, k))
	}
}

// engineError describes a status the kernel library returned for arguments
// that checkGemm let through (for instance dimensions past OpenBLAS's int32).
func engineError(op string, rc, m, n, k int) string {
	if rc == -1 {
		return fmt.Sprintf("tensor: %s: m=%d n=%d k=%d exceeds the BLAS engine's 32-bit dimensions", op, m, n, k)
	}
	return fmt.Sprintf("tensor: %s: %s rejected m=%d n=%d k=%d with status %d", op, engineName, m, n, k, rc)
}

// engineBLASCore describes OpenBLAS's kernel set (see BLASCore).
func engineBLASCore() string {
	var detected *C.char
	var reinit, slow, narrow C.int
	core := C.GoString(C.goddp_blas_core(&detected, &reinit, &slow, &narrow))
	switch {
	case slow != 0:
		return core + " (pre-AVX2 kernels on an AVX2 CPU: float32 products go to oneDNN)"
	case narrow != 0 && engineName != "openblas":
		return core + " (AVX2 kernels on a full-width AVX-512 CPU: float32 products go to oneDNN)"
	case reinit != 0:
		return core + " (OpenBLAS picked " + C.GoString(detected) + "; the engine re-initialised it)"
	}
	return core
}

func engineSetThreads(n int) { C.goddp_set_threads(C.int(n)) }

// engineThreads is the number of threads one engine call may use.
func engineThreads() int { return int(C.goddp_threads()) }

// engineKernel names the kernel library the engine picks for a float32 shape.
func engineKernel(transA, transB bool, m, n, k int) string {
	if C.goddp_sgemm_kernel(cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k)) != 0 {
		return "onednn"
	}
	return "openblas"
}

func engineSgemmTri(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, c []float32, ldc int) {
	rc := C.goddp_sgemm_tri(C.int(mode), cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(unsafe.SliceData(a))), C.int64_t(lda),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(b))), C.int64_t(ldb),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc))
	if rc != 0 {
		panic(engineError("GemmTri", int(rc), m, n, k))
	}
}

// engineUsesTri reports whether engineSgemmTri skips the masked part.
func engineUsesTri(mode TriMode, m, n, k int) bool {
	return engineUsesSmall(m, n, k, 0) && C.goddp_small_tri_shape(C.int(mode), C.int64_t(m), C.int64_t(n), C.int64_t(k)) != 0
}

// engineSgemmTriBF16 runs GemmTriBF16 on the AVX512-BF16 register kernel
// and reports true, or reports false, C untouched, where that kernel does
// not take the shape on this CPU.
func engineSgemmTriBF16(mode TriMode, transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, c []float32, ldc int) bool {
	ap, a16 := a.ptr()
	bp, b16 := b.ptr()
	return C.goddp_sgemm_tri_bf16(C.int(mode), cbool(transA), cbool(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.float(alpha), ap, a16, C.int64_t(lda), bp, b16, C.int64_t(ldb),
		(*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int64_t(ldc)) == 0
}

// engineUsesTriBF16 reports whether engineSgemmTriBF16 takes the shape.
func engineUsesTriBF16(mode TriMode, m, n, k int) bool {
	return C.goddp_sgemm_uses_tri_bf16(C.int(mode), C.int64_t(m), C.int64_t(n), C.int64_t(k)) != 0
}
