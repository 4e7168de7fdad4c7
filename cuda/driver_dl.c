//go:build cuda

// See driver_dl.h. Nothing here has run on a GPU: the machine it was
// written on has none. The loading and no-device paths have.

#include "driver_dl.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CU_STREAM_NON_BLOCKING 0x1

static int gcu_sym(void *h, const char *name, void **out, char *err, int cap) {
	*out = dlsym(h, name);
	if (!*out) {
		snprintf(err, (size_t)cap, "symbol %s missing", name);
		return 1;
	}
	return 0;
}

#define SYM(field, name)                                                     \
	if (gcu_sym(h, name, (void **)&l->field, err, cap)) return 1;

static void *gcu_open_lib(const char *path, char *err, int cap) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, (size_t)cap, "%s", e ? e : "dlopen failed");
	}
	return h;
}

int gcu_load_cuda(gcu_lib *l, const char *path, char *err, int cap) {
	void *h = l->cuda_handle = gcu_open_lib(path, err, cap);
	if (!h) return 1;
	SYM(cuInit, "cuInit");
	SYM(cuDriverGetVersion, "cuDriverGetVersion");
	SYM(cuGetErrorString, "cuGetErrorString");
	SYM(cuDeviceGetCount, "cuDeviceGetCount");
	SYM(cuDeviceGet, "cuDeviceGet");
	SYM(cuDeviceGetName, "cuDeviceGetName");
	SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
	SYM(cuStreamCreate, "cuStreamCreate");
	SYM(cuStreamDestroy, "cuStreamDestroy_v2");
	SYM(cuStreamSynchronize, "cuStreamSynchronize");
	SYM(cuModuleLoadData, "cuModuleLoadData");
	SYM(cuModuleGetFunction, "cuModuleGetFunction");
	SYM(cuModuleUnload, "cuModuleUnload");
	SYM(cuLaunchKernel, "cuLaunchKernel");
	SYM(cuMemAlloc, "cuMemAlloc_v2");
	SYM(cuMemFree, "cuMemFree_v2");
	SYM(cuMemsetD8Async, "cuMemsetD8Async");
	SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
	SYM(cuEventCreate, "cuEventCreate");
	SYM(cuEventRecord, "cuEventRecord");
	SYM(cuEventSynchronize, "cuEventSynchronize");
	SYM(cuEventQuery, "cuEventQuery");
	SYM(cuEventDestroy, "cuEventDestroy_v2");
	SYM(cuStreamWaitEvent, "cuStreamWaitEvent");
	SYM(cuLaunchHostFunc, "cuLaunchHostFunc");
	SYM(cuMemHostAlloc, "cuMemHostAlloc");
	SYM(cuMemFreeHost, "cuMemFreeHost");
	return 0;
}

int gcu_load_cublas(gcu_lib *l, const char *path, char *err, int cap) {
	void *h = gcu_open_lib(path, err, cap);
	if (!h) return 1;
	l->blas_handle = h;
	SYM(cublasCreate, "cublasCreate_v2");
	SYM(cublasDestroy, "cublasDestroy_v2");
	SYM(cublasSetStream, "cublasSetStream_v2");
	SYM(cublasGetProperty, "cublasGetProperty");
	SYM(cublasSgemm, "cublasSgemm_v2");
	SYM(cublasSgemmStridedBatched, "cublasSgemmStridedBatched");
	SYM(cublasSgemv, "cublasSgemv_v2");
	SYM(cublasSasum, "cublasSasum_v2");
	SYM(cublasSscal, "cublasSscal_v2");
	// Optional (bf16 autocast): without it bf16 products take the float32
	// GEMM on widened operands.
	l->cublasGemmEx = dlsym(h, "cublasGemmEx");
	return 0;
}

const char *gcu_error(gcu_lib *l, int code) {
	const char *s = NULL;
	if (l->cuGetErrorString && l->cuGetErrorString(code, &s) == 0 && s) return s;
	return "unknown CUDA error";
}

#define CURRENT(ctx)                                                          \
	{                                                                         \
		int rc_ = l->cuCtxSetCurrent(ctx);                                    \
		if (rc_) return rc_;                                                  \
	}

int gcu_init(gcu_lib *l, int *version, int *count) {
	*version = 0;
	*count = 0;
	l->cuDriverGetVersion(version); // works before cuInit
	int rc = l->cuInit(0);
	if (rc) return rc;
	return l->cuDeviceGetCount(count);
}

int gcu_open(gcu_lib *l, int ordinal, void **ctx, void **stream, char *name, int namecap) {
	int dev = 0;
	int rc = l->cuDeviceGet(&dev, ordinal);
	if (rc) return rc;
	if (l->cuDeviceGetName(name, namecap, dev)) name[0] = 0;
	// The primary context: the one the CUDA runtime, and so cuBLAS and
	// NCCL, use on this device, so device pointers are shared with them.
	rc = l->cuDevicePrimaryCtxRetain(ctx, dev);
	if (rc) return rc;
	rc = l->cuCtxSetCurrent(*ctx);
	if (!rc) rc = l->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING);
	if (rc) {
		l->cuDevicePrimaryCtxRelease(dev);
		*ctx = NULL;
	}
	return rc;
}

int gcu_close(gcu_lib *l, int ordinal, void *ctx, void *stream) {
	int rc = 0;
	if (stream) {
		CURRENT(ctx);
		rc = l->cuStreamDestroy(stream);
	}
	int dev = 0;
	int rc2 = l->cuDeviceGet(&dev, ordinal);
	if (!rc2) rc2 = l->cuDevicePrimaryCtxRelease(dev);
	return rc ? rc : rc2;
}

int gcu_alloc(gcu_lib *l, void *ctx, size_t n, gcu_devptr *p) {
	CURRENT(ctx);
	return l->cuMemAlloc(p, n);
}

int gcu_free(gcu_lib *l, void *ctx, gcu_devptr p) {
	CURRENT(ctx);
	return l->cuMemFree(p);
}

int gcu_zero(gcu_lib *l, void *ctx, gcu_devptr p, size_t n, void *stream) {
	CURRENT(ctx);
	return l->cuMemsetD8Async(p, 0, n, stream);
}

// The copy to the host is synchronous for the caller: the host memory is
// Go's. (The copy to the device goes through pinned staging and does not
// wait: upload_cuda.go, gcu_htod_async.)
int gcu_dtoh(gcu_lib *l, void *ctx, void *dst, gcu_devptr src, size_t n, void *stream) {
	CURRENT(ctx);
	int rc = l->cuMemcpyDtoHAsync(dst, src, n, stream);
	return rc ? rc : l->cuStreamSynchronize(stream);
}

int gcu_sync(gcu_lib *l, void *ctx, void *stream) {
	CURRENT(ctx);
	return l->cuStreamSynchronize(stream);
}

int gcu_module(gcu_lib *l, void *ctx, const char *ptx, void **mod) {
	CURRENT(ctx);
	return l->cuModuleLoadData(mod, ptx);
}

// The goroutine that loaded the module may be on another thread now, and
// the context is current per thread: make it current here too.
int gcu_function(gcu_lib *l, void *ctx, void *mod, const char *name, void **fn) {
	CURRENT(ctx);
	return l->cuModuleGetFunction(fn, mod, name);
}

int gcu_unload(gcu_lib *l, void *ctx, void *mod) {
	CURRENT(ctx);
	return l->cuModuleUnload(mod);
}

// Every kernel parameter is passed as 8 bytes: 64-bit pointers and
// integers, and float32s in the low half (little-endian), which the driver
// reads as 4 bytes.
int gcu_launch(gcu_lib *l, void *ctx, void *fn, unsigned grid, unsigned block, void *stream, unsigned long long *args, int nargs) {
	CURRENT(ctx);
	void *params[16];
	if (nargs > 16) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	return l->cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, params, NULL);
}

// ---- streams and events for ddp's queues (queues_cuda.go).

#define CU_EVENT_DISABLE_TIMING 0x2

int gcu_stream_new(gcu_lib *l, void *ctx, void **stream) {
	CURRENT(ctx);
	return l->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING);
}

int gcu_stream_destroy(gcu_lib *l, void *ctx, void *stream) {
	CURRENT(ctx);
	return l->cuStreamDestroy(stream);
}

// Events only order and signal: no timing, the cheapest kind.
int gcu_event_new(gcu_lib *l, void *ctx, void **ev) {
	CURRENT(ctx);
	return l->cuEventCreate(ev, CU_EVENT_DISABLE_TIMING);
}

int gcu_event_record(gcu_lib *l, void *ctx, void *ev, void *stream) {
	CURRENT(ctx);
	return l->cuEventRecord(ev, stream);
}

int gcu_event_sync(gcu_lib *l, void *ctx, void *ev) {
	CURRENT(ctx);
	return l->cuEventSynchronize(ev);
}

// 0 when the event has completed, CUDA_ERROR_NOT_READY (600) while not:
// it never waits.
int gcu_event_query(gcu_lib *l, void *ctx, void *ev) {
	CURRENT(ctx);
	return l->cuEventQuery(ev);
}

// An event destroyed before it completes is released when it does.
int gcu_event_destroy(gcu_lib *l, void *ctx, void *ev) {
	CURRENT(ctx);
	return l->cuEventDestroy(ev);
}

int gcu_stream_wait(gcu_lib *l, void *ctx, void *stream, void *ev) {
	CURRENT(ctx);
	return l->cuStreamWaitEvent(stream, ev, 0);
}

// The asynchronous copies take pinned host memory (gcu_host_alloc), so the
// host does not wait for them.
int gcu_htod_async(gcu_lib *l, void *ctx, gcu_devptr dst, const void *src, size_t n, void *stream) {
	CURRENT(ctx);
	return l->cuMemcpyHtoDAsync(dst, src, n, stream);
}

int gcu_dtoh_async(gcu_lib *l, void *ctx, void *dst, gcu_devptr src, size_t n, void *stream) {
	CURRENT(ctx);
	return l->cuMemcpyDtoHAsync(dst, src, n, stream);
}

int gcu_dtod_async(gcu_lib *l, void *ctx, gcu_devptr dst, gcu_devptr src, size_t n, void *stream) {
	CURRENT(ctx);
	return l->cuMemcpyDtoDAsync(dst, src, n, stream);
}

// Host functions run on the driver's thread, in the stream's order; the
// trampoline hands the Go side its handle (queues_cuda.go).
extern void goddpCUDAHostFunc(size_t);
static void gcu_host_tramp(void *h) { goddpCUDAHostFunc((size_t)h); }

int gcu_host_func(gcu_lib *l, void *ctx, void *stream, size_t handle) {
	CURRENT(ctx);
	return l->cuLaunchHostFunc(stream, gcu_host_tramp, (void *)handle);
}

int gcu_host_alloc(gcu_lib *l, void *ctx, size_t n, void **p) {
	CURRENT(ctx);
	return l->cuMemHostAlloc(p, n, 0);
}

int gcu_host_free(gcu_lib *l, void *ctx, void *p) {
	CURRENT(ctx);
	return l->cuMemFreeHost(p);
}

int gcu_blas_create(gcu_lib *l, void *ctx, void *stream, void **h) {
	if (l->cuCtxSetCurrent(ctx)) return 1; // CUBLAS_STATUS_NOT_INITIALIZED
	int rc = l->cublasCreate(h);
	if (rc) return rc;
	rc = l->cublasSetStream(*h, stream);
	if (rc) {
		l->cublasDestroy(*h);
		*h = NULL;
	}
	return rc;
}

int gcu_blas_destroy(gcu_lib *l, void *ctx, void *h) {
	if (l->cuCtxSetCurrent(ctx)) return 1;
	return l->cublasDestroy(h);
}

int gcu_blas_version(gcu_lib *l, int *v) {
	int major = 0, minor = 0, patch = 0; // libraryPropertyType: MAJOR, MINOR, PATCH
	int rc = l->cublasGetProperty(0, &major);
	if (!rc) rc = l->cublasGetProperty(1, &minor);
	if (!rc) rc = l->cublasGetProperty(2, &patch);
	*v = major * 10000 + minor * 100 + patch;
	return rc;
}

#define BLAS_CURRENT(ctx)                                                     \
	if (l->cuCtxSetCurrent(ctx)) return 1;

int gcu_sgemm(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha, gcu_devptr a, int lda,
              gcu_devptr b, int ldb, float beta, gcu_devptr c, int ldc) {
	BLAS_CURRENT(ctx);
	return l->cublasSgemm(h, ta, tb, m, n, k, &alpha, (const float *)a, lda, (const float *)b, ldb, &beta, (float *)c, ldc);
}

int gcu_sgemm_strided_batched(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha,
                              gcu_devptr a, int lda, long long sa, gcu_devptr b, int ldb, long long sb, float beta,
                              gcu_devptr c, int ldc, long long sc, int batch) {
	BLAS_CURRENT(ctx);
	return l->cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, (const float *)a, lda, sa, (const float *)b, ldb, sb,
	                                    &beta, (float *)c, ldc, sc, batch);
}

int gcu_sgemv(gcu_lib *l, void *ctx, void *h, int t, int m, int n, float alpha, gcu_devptr a, int lda, gcu_devptr x,
              float beta, gcu_devptr y) {
	BLAS_CURRENT(ctx);
	return l->cublasSgemv(h, t, m, n, &alpha, (const float *)a, lda, (const float *)x, 1, &beta, (float *)y, 1);
}

// With the default host pointer mode, cublasSasum waits for its result.
int gcu_sasum(gcu_lib *l, void *ctx, void *h, int n, gcu_devptr x, float *out) {
	BLAS_CURRENT(ctx);
	return l->cublasSasum(h, n, (const float *)x, 1, out);
}

int gcu_sscal(gcu_lib *l, void *ctx, void *h, int n, float alpha, gcu_devptr x) {
	BLAS_CURRENT(ctx);
	return l->cublasSscal(h, n, &alpha, (float *)x, 1);
}

// ---- bf16 GEMM for autocast (bf16_cuda.go).

// cuBLAS 11's enum values (library_types.h, cublas_api.h).
#define GCU_R_32F 0        // CUDA_R_32F
#define GCU_R_16BF 14      // CUDA_R_16BF
#define GCU_COMPUTE_32F 68 // CUBLAS_COMPUTE_32F: float32 accumulation, no TF32 or bf16 down-conversion
#define GCU_GEMM_DEFAULT -1 // CUBLAS_GEMM_DEFAULT

int gcu_has_gemm_bf16(gcu_lib *l) { return l->cublasGemmEx != NULL; }

int gcu_gemm_bf16(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha, gcu_devptr a,
                  int lda, gcu_devptr b, int ldb, float beta, gcu_devptr c, int ldc) {
	BLAS_CURRENT(ctx);
	return l->cublasGemmEx(h, ta, tb, m, n, k, &alpha, (const void *)a, GCU_R_16BF, lda, (const void *)b, GCU_R_16BF,
	                       ldb, &beta, (void *)c, GCU_R_32F, ldc, GCU_COMPUTE_32F, GCU_GEMM_DEFAULT);
}
