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
	SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
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
	SYM(cublasSetMathMode, "cublasSetMathMode");
	return 0;
}

// gcu_preload opens a library for its soname's sake only: a later dlopen
// of that soname (cuDNN's of its sub-libraries) finds it loaded. The
// handle is never closed.
int gcu_preload(const char *path, char *err, int cap) { return gcu_open_lib(path, err, cap) ? 0 : 1; }

// A cuDNN that does not load, or lacks a symbol, leaves l->dnn_handle
// NULL: convolutions then run on goddp's own kernels.
int gcu_load_cudnn(gcu_lib *l, const char *path, char *err, int cap) {
	void *h = gcu_open_lib(path, err, cap);
	if (!h) return 1;
	SYM(cudnnGetVersion, "cudnnGetVersion");
	SYM(cudnnGetErrorString, "cudnnGetErrorString");
	SYM(cudnnCreate, "cudnnCreate");
	SYM(cudnnDestroy, "cudnnDestroy");
	SYM(cudnnSetStream, "cudnnSetStream");
	SYM(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor");
	SYM(cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
	SYM(cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
	SYM(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor");
	SYM(cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
	SYM(cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
	SYM(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
	SYM(cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
	SYM(cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
	SYM(cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType");
	SYM(cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
	SYM(cudnnGetConvolution2dForwardOutputDim, "cudnnGetConvolution2dForwardOutputDim");
	SYM(cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
	SYM(cudnnGetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
	SYM(cudnnGetConvolutionBackwardFilterAlgorithm_v7, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
	l->cudnnFindConvolutionForwardAlgorithm = dlsym(h, "cudnnFindConvolutionForwardAlgorithm");
	l->cudnnFindConvolutionBackwardDataAlgorithm = dlsym(h, "cudnnFindConvolutionBackwardDataAlgorithm");
	l->cudnnFindConvolutionBackwardFilterAlgorithm = dlsym(h, "cudnnFindConvolutionBackwardFilterAlgorithm");
	SYM(cudnnGetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
	SYM(cudnnGetConvolutionBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize");
	SYM(cudnnGetConvolutionBackwardFilterWorkspaceSize, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
	SYM(cudnnConvolutionForward, "cudnnConvolutionForward");
	SYM(cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData");
	SYM(cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
	l->dnn_handle = h;
	return 0;
}

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

int gcu_capability(gcu_lib *l, int ordinal, int *major, int *minor) {
	int dev = 0;
	int rc = l->cuDeviceGet(&dev, ordinal);
	if (!rc) rc = l->cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	if (!rc) rc = l->cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	return rc;
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

// image is PTX text (NUL-terminated, JIT-compiled by the driver) or a
// cubin (ELF machine code for the device's architecture).
int gcu_module(gcu_lib *l, void *ctx, const void *image, void **mod) {
	CURRENT(ctx);
	return l->cuModuleLoadData(mod, image);
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

// cublasMath_t: CUBLAS_DEFAULT_MATH 0, CUBLAS_PEDANTIC_MATH 2,
// CUBLAS_TF32_TENSOR_OP_MATH 3.
int gcu_blas_math(gcu_lib *l, void *ctx, void *h, int mode) {
	BLAS_CURRENT(ctx);
	return l->cublasSetMathMode(h, mode);
}

// ---- cuDNN (cuDNN 8 and 9's legacy convolution API).

#define CUDNN_TENSOR_NCHW 0
#define CUDNN_DATA_FLOAT 0
#define CUDNN_CROSS_CORRELATION 1
#define CUDNN_TENSOR_OP_MATH 1
#define CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION 2

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
typedef struct {
	int algo;
	int status;
	float time;
	size_t memory;
	int determinism;
	int mathType;
	int reserved[3];
} gcu_dnn_perf;

#define DNN_CURRENT(ctx)                                                      \
	if (l->cuCtxSetCurrent(ctx)) return GCU_DNN_NO_CONTEXT;

size_t gcu_dnn_version(gcu_lib *l) { return l->cudnnGetVersion(); }

const char *gcu_dnn_error(gcu_lib *l, int rc) {
	const char *s = l->cudnnGetErrorString ? l->cudnnGetErrorString(rc) : NULL;
	return s ? s : "unknown cuDNN status";
}

int gcu_dnn_create(gcu_lib *l, void *ctx, void *stream, void **h) {
	DNN_CURRENT(ctx);
	int rc = l->cudnnCreate(h);
	if (rc) return rc;
	rc = l->cudnnSetStream(*h, stream);
	if (rc) {
		l->cudnnDestroy(*h);
		*h = NULL;
	}
	return rc;
}

int gcu_dnn_destroy(gcu_lib *l, void *ctx, void *h) {
	DNN_CURRENT(ctx);
	return l->cudnnDestroy(h);
}

void gcu_dnn_plan_free(gcu_lib *l, gcu_dnn_plan *p) {
	if (p->x) l->cudnnDestroyTensorDescriptor(p->x);
	if (p->y) l->cudnnDestroyTensorDescriptor(p->y);
	if (p->w) l->cudnnDestroyFilterDescriptor(p->w);
	if (p->conv) l->cudnnDestroyConvolutionDescriptor(p->conv);
	p->x = p->y = p->w = p->conv = NULL;
}

// pick takes the first algorithm of perf (the heuristics' order, or
// cudnnFind*'s, fastest first) that can run, within the workspace bound,
// and, unless tf32, without tensor cores; its exact workspace comes from
// the pass's WorkspaceSize call. With tensor cores allowed it runs with
// the math type it was listed (or timed) with, unless that lets cuDNN
// convert the operands down (to float16); else with math, so that an
// algorithm listed under DEFAULT_MATH cannot take TF32 up.
static int pick(gcu_lib *l, void *h, gcu_dnn_plan *p, int pass, gcu_dnn_perf *perf, int n, int math, int tf32,
                size_t wsmax) {
	for (int i = 0; i < n; i++) {
		if (perf[i].status) continue;
		if (!tf32 && (perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
			continue;
		size_t ws = 0;
		int rc;
		switch (pass) {
		case 0: rc = l->cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, perf[i].algo, &ws); break;
		case 1: rc = l->cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->conv, p->x, perf[i].algo, &ws); break;
		default: rc = l->cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->conv, p->w, perf[i].algo, &ws);
		}
		if (rc || ws > wsmax) continue;
		p->algo[pass] = perf[i].algo;
		p->math[pass] = tf32 && perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? perf[i].mathType : math;
		p->ws[pass] = ws;
		return 0;
	}
	return GCU_DNN_NO_ALGORITHM;
}

typedef int (*gcu_dnn_list)(void *, void *, void *, void *, void *, int, int *, void *);

// choose fills pass's algorithm from timed's list (cudnnFind*), when not
// NULL, else, or when that fails or offers nothing that fits (cudnnFind*
// allocates its own scratch, which may not be there), from heuristics'
// (cudnnGet*_v7). a, b and out are the pass's descriptors in the order
// both take them (before and after the convolution descriptor).
static int choose(gcu_lib *l, void *h, gcu_dnn_plan *p, int pass, gcu_dnn_list timed, gcu_dnn_list heuristics, void *a,
                  void *b, void *out, int math, int tf32, size_t wsmax) {
	gcu_dnn_perf perf[16];
	int got = 0, rc;
	if (timed && !timed(h, a, b, p->conv, out, 16, &got, perf) && !pick(l, h, p, pass, perf, got, math, tf32, wsmax))
		return 0;
	got = 0;
	if ((rc = heuristics(h, a, b, p->conv, out, 16, &got, perf))) return rc;
	return pick(l, h, p, pass, perf, got, math, tf32, wsmax);
}

int gcu_dnn_plan_new(gcu_lib *l, void *ctx, void *h, const int *d, int math, int tf32, int find, size_t wsmax,
                     gcu_dnn_plan *p) {
	DNN_CURRENT(ctx);
	int n = d[0], c = d[1], hh = d[2], w = d[3], o = d[4], kh = d[5], kw = d[6], ph = d[7], pw = d[8], sh = d[9],
	    sw = d[10], dh = d[11], dw = d[12], g = d[13], oh = d[14], ow = d[15];
	int rc;
#define TRY(call)                                                             \
	if ((rc = (call))) goto fail;
	TRY(l->cudnnCreateTensorDescriptor(&p->x));
	TRY(l->cudnnCreateTensorDescriptor(&p->y));
	TRY(l->cudnnCreateFilterDescriptor(&p->w));
	TRY(l->cudnnCreateConvolutionDescriptor(&p->conv));
	TRY(l->cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hh, w));
	TRY(l->cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, o, c / g, kh, kw));
	TRY(l->cudnnSetConvolution2dDescriptor(p->conv, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	TRY(l->cudnnSetConvolutionGroupCount(p->conv, g));
	TRY(l->cudnnSetConvolutionMathType(p->conv, math));
	int yn, yc, yh, yw;
	TRY(l->cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &yn, &yc, &yh, &yw));
	if (yn != n || yc != o || yh != oh || yw != ow) {
		rc = GCU_DNN_SHAPE;
		goto fail;
	}
	TRY(l->cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, o, oh, ow));
	if (!l->cudnnFindConvolutionForwardAlgorithm || !l->cudnnFindConvolutionBackwardDataAlgorithm ||
	    !l->cudnnFindConvolutionBackwardFilterAlgorithm)
		find = 0;
	p->status[0] = choose(l, h, p, 0, find ? l->cudnnFindConvolutionForwardAlgorithm : NULL,
	                      l->cudnnGetConvolutionForwardAlgorithm_v7, p->x, p->w, p->y, math, tf32, wsmax);
	p->status[1] = choose(l, h, p, 1, find ? l->cudnnFindConvolutionBackwardDataAlgorithm : NULL,
	                      l->cudnnGetConvolutionBackwardDataAlgorithm_v7, p->w, p->y, p->x, math, tf32, wsmax);
	p->status[2] = choose(l, h, p, 2, find ? l->cudnnFindConvolutionBackwardFilterAlgorithm : NULL,
	                      l->cudnnGetConvolutionBackwardFilterAlgorithm_v7, p->x, p->y, p->w, math, tf32, wsmax);
	return 0;
fail:
	gcu_dnn_plan_free(l, p);
	return rc;
#undef TRY
}

int gcu_dnn_conv(gcu_lib *l, void *ctx, void *h, gcu_dnn_plan *p, int pass, gcu_devptr out, gcu_devptr a, gcu_devptr b,
                 float beta, gcu_devptr ws, size_t wsbytes) {
	DNN_CURRENT(ctx);
	if (p->status[pass]) return p->status[pass];
	float alpha = 1;
	void *w = wsbytes ? (void *)ws : NULL;
	// The passes share the descriptor; each runs with its algorithm's math.
	int rc = l->cudnnSetConvolutionMathType(p->conv, p->math[pass]);
	if (rc) return rc;
	switch (pass) {
	case 0: // y = conv(x, w): out y, a x, b w
		return l->cudnnConvolutionForward(h, &alpha, p->x, (void *)a, p->w, (void *)b, p->conv, p->algo[0], w, wsbytes,
		                                  &beta, p->y, (void *)out);
	case 1: // dx from dy and w: out dx, a dy, b w
		return l->cudnnConvolutionBackwardData(h, &alpha, p->w, (void *)b, p->y, (void *)a, p->conv, p->algo[1], w,
		                                       wsbytes, &beta, p->x, (void *)out);
	default: // dw from x and dy: out dw, a x, b dy
		return l->cudnnConvolutionBackwardFilter(h, &alpha, p->x, (void *)a, p->y, (void *)b, p->conv, p->algo[2], w,
		                                         wsbytes, &beta, p->w, (void *)out);
	}
}
