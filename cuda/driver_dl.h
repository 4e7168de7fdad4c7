// C side of goddp/cuda's device layer: libcuda.so.1 (the driver API) and
// cuBLAS are opened at run time with dlopen and called through the
// function pointers declared here, following CUDA's cuda.h and
// cublas_api.h on 64-bit Linux. Nothing CUDA is linked, so a binary starts
// on any machine and says what is missing when asked for a GPU; no CUDA
// header is needed to build it. See doc.go.
#ifndef GODDP_CUDA_DRIVER_DL_H
#define GODDP_CUDA_DRIVER_DL_H

#include <stddef.h>

typedef unsigned long long gcu_devptr; // CUdeviceptr

typedef struct {
	void *cuda_handle, *blas_handle, *dnn_handle;
	// CUDA driver API (CUresult is an int enum; CUcontext, CUstream,
	// CUmodule, CUfunction and CUevent are pointers; CUdevice is an int).
	int (*cuInit)(unsigned);
	int (*cuDriverGetVersion)(int *);
	int (*cuGetErrorString)(int, const char **);
	int (*cuDeviceGetCount)(int *);
	int (*cuDeviceGet)(int *, int);
	int (*cuDeviceGetName)(char *, int, int);
	int (*cuDeviceGetAttribute)(int *, int, int);
	int (*cuDevicePrimaryCtxRetain)(void **, int);
	int (*cuDevicePrimaryCtxRelease)(int);
	int (*cuCtxSetCurrent)(void *);
	int (*cuStreamCreate)(void **, unsigned);
	int (*cuStreamDestroy)(void *);
	int (*cuStreamSynchronize)(void *);
	int (*cuModuleLoadData)(void **, const void *);
	int (*cuModuleGetFunction)(void **, void *, const char *);
	int (*cuModuleUnload)(void *);
	int (*cuLaunchKernel)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
	                      unsigned shmem, void *stream, void **params, void **extra);
	int (*cuMemAlloc)(gcu_devptr *, size_t);
	int (*cuMemFree)(gcu_devptr);
	int (*cuMemsetD8Async)(gcu_devptr, unsigned char, size_t, void *);
	int (*cuMemcpyHtoDAsync)(gcu_devptr, const void *, size_t, void *);
	int (*cuMemcpyDtoHAsync)(void *, gcu_devptr, size_t, void *);
	// Streams and events for ddp's queues (queues_cuda.go).
	int (*cuMemcpyDtoDAsync)(gcu_devptr, gcu_devptr, size_t, void *);
	int (*cuEventCreate)(void **, unsigned);
	int (*cuEventRecord)(void *, void *);
	int (*cuEventSynchronize)(void *);
	int (*cuEventQuery)(void *);
	int (*cuEventDestroy)(void *);
	int (*cuStreamWaitEvent)(void *, void *, unsigned);
	int (*cuLaunchHostFunc)(void *, void (*)(void *), void *);
	int (*cuMemHostAlloc)(void **, size_t, unsigned);
	int (*cuMemFreeHost)(void *);
	// cuBLAS (cublasStatus_t is an int enum, cublasHandle_t a pointer,
	// cublasOperation_t N = 0, T = 1).
	int (*cublasCreate)(void **);
	int (*cublasDestroy)(void *);
	int (*cublasSetStream)(void *, void *);
	int (*cublasGetProperty)(int, int *);
	int (*cublasSgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
	                   const float *, float *, int);
	int (*cublasSgemmStridedBatched)(void *, int, int, int, int, int, const float *, const float *, int, long long,
	                                 const float *, int, long long, const float *, float *, int, long long, int);
	int (*cublasSgemv)(void *, int, int, int, const float *, const float *, int, const float *, int, const float *,
	                   float *, int);
	int (*cublasSasum)(void *, int, const float *, int, float *);
	int (*cublasSscal)(void *, int, const float *, float *, int);
	// ---- bf16 GEMM for autocast (bf16_cuda.go). cublasGemmEx, loaded
	// when present (NULL otherwise): handle, transa, transb, m, n, k,
	// alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
	// computeType, algo; the types are the cudaDataType_t,
	// cublasComputeType_t and cublasGemmAlgo_t enums, as ints.
	int (*cublasGemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
	                    const void *, void *, int, int, int, int);
	int (*cublasSetMathMode)(void *, int);
	// cuDNN's legacy convolution API, as in cuDNN 8 and 9 (cudnnStatus_t
	// and every enum are ints, handles and descriptors pointers).
	size_t (*cudnnGetVersion)(void);
	const char *(*cudnnGetErrorString)(int);
	int (*cudnnCreate)(void **);
	int (*cudnnDestroy)(void *);
	int (*cudnnSetStream)(void *, void *);
	int (*cudnnCreateTensorDescriptor)(void **);
	int (*cudnnSetTensor4dDescriptor)(void *, int, int, int, int, int, int);
	int (*cudnnDestroyTensorDescriptor)(void *);
	int (*cudnnCreateFilterDescriptor)(void **);
	int (*cudnnSetFilter4dDescriptor)(void *, int, int, int, int, int, int);
	int (*cudnnDestroyFilterDescriptor)(void *);
	int (*cudnnCreateConvolutionDescriptor)(void **);
	int (*cudnnSetConvolution2dDescriptor)(void *, int, int, int, int, int, int, int, int);
	int (*cudnnSetConvolutionGroupCount)(void *, int);
	int (*cudnnSetConvolutionMathType)(void *, int);
	int (*cudnnDestroyConvolutionDescriptor)(void *);
	int (*cudnnGetConvolution2dForwardOutputDim)(void *, void *, void *, int *, int *, int *, int *);
	int (*cudnnGetConvolutionForwardAlgorithm_v7)(void *, void *, void *, void *, void *, int, int *, void *);
	int (*cudnnGetConvolutionBackwardDataAlgorithm_v7)(void *, void *, void *, void *, void *, int, int *, void *);
	int (*cudnnGetConvolutionBackwardFilterAlgorithm_v7)(void *, void *, void *, void *, void *, int, int *, void *);
	// Optional: cuDNN's measured choice (torch.backends.cudnn.benchmark),
	// with the _v7 heuristics' signatures.
	int (*cudnnFindConvolutionForwardAlgorithm)(void *, void *, void *, void *, void *, int, int *, void *);
	int (*cudnnFindConvolutionBackwardDataAlgorithm)(void *, void *, void *, void *, void *, int, int *, void *);
	int (*cudnnFindConvolutionBackwardFilterAlgorithm)(void *, void *, void *, void *, void *, int, int *, void *);
	int (*cudnnGetConvolutionForwardWorkspaceSize)(void *, void *, void *, void *, void *, int, size_t *);
	int (*cudnnGetConvolutionBackwardDataWorkspaceSize)(void *, void *, void *, void *, void *, int, size_t *);
	int (*cudnnGetConvolutionBackwardFilterWorkspaceSize)(void *, void *, void *, void *, void *, int, size_t *);
	int (*cudnnConvolutionForward)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *,
	                               size_t, const void *, void *, void *);
	int (*cudnnConvolutionBackwardData)(void *, const void *, void *, const void *, void *, const void *, void *, int,
	                                    void *, size_t, const void *, void *, void *);
	int (*cudnnConvolutionBackwardFilter)(void *, const void *, void *, const void *, void *, const void *, void *, int,
	                                      void *, size_t, const void *, void *, void *);
} gcu_lib;

// gcu_dnn_plan is one convolution shape's cuDNN descriptors (x, y as
// NCHW float tensors, w as a filter) and, per pass (0 forward, 1 backward
// data, 2 backward filter), the algorithm chosen, the math type it runs
// with and its workspace, or the status that kept cuDNN from choosing one.
typedef struct {
	void *x, *y, *w, *conv;
	int algo[3], math[3], status[3];
	size_t ws[3];
} gcu_dnn_plan;

// Loading: 0 on success, else a message in err.
int gcu_load_cuda(gcu_lib *l, const char *path, char *err, int cap);
int gcu_load_cublas(gcu_lib *l, const char *path, char *err, int cap);
int gcu_load_cudnn(gcu_lib *l, const char *path, char *err, int cap);
int gcu_preload(const char *path, char *err, int cap);
const char *gcu_error(gcu_lib *l, int code);

// Driver calls (return CUresult). Those taking ctx make it current first,
// in the same C call, so the goroutine's thread does not matter.
int gcu_init(gcu_lib *l, int *version, int *count);
int gcu_open(gcu_lib *l, int ordinal, void **ctx, void **stream, char *name, int namecap);
int gcu_capability(gcu_lib *l, int ordinal, int *major, int *minor);
int gcu_close(gcu_lib *l, int ordinal, void *ctx, void *stream);
int gcu_alloc(gcu_lib *l, void *ctx, size_t n, gcu_devptr *p);
int gcu_free(gcu_lib *l, void *ctx, gcu_devptr p);
int gcu_zero(gcu_lib *l, void *ctx, gcu_devptr p, size_t n, void *stream);
int gcu_dtoh(gcu_lib *l, void *ctx, void *dst, gcu_devptr src, size_t n, void *stream);
int gcu_sync(gcu_lib *l, void *ctx, void *stream);
int gcu_module(gcu_lib *l, void *ctx, const void *image, void **mod);
int gcu_function(gcu_lib *l, void *ctx, void *mod, const char *name, void **fn);
int gcu_unload(gcu_lib *l, void *ctx, void *mod);
int gcu_launch(gcu_lib *l, void *ctx, void *fn, unsigned grid, unsigned block, void *stream, unsigned long long *args, int nargs);

// Stream and event calls for ddp's queues (return CUresult). Every one is
// asynchronous for the host except the synchronisations and the frees.
int gcu_stream_new(gcu_lib *l, void *ctx, void **stream);
int gcu_stream_destroy(gcu_lib *l, void *ctx, void *stream);
int gcu_event_new(gcu_lib *l, void *ctx, void **ev);
int gcu_event_record(gcu_lib *l, void *ctx, void *ev, void *stream);
int gcu_event_sync(gcu_lib *l, void *ctx, void *ev);
int gcu_event_query(gcu_lib *l, void *ctx, void *ev);
int gcu_event_destroy(gcu_lib *l, void *ctx, void *ev);
int gcu_stream_wait(gcu_lib *l, void *ctx, void *stream, void *ev);
int gcu_htod_async(gcu_lib *l, void *ctx, gcu_devptr dst, const void *src, size_t n, void *stream);
int gcu_dtoh_async(gcu_lib *l, void *ctx, void *dst, gcu_devptr src, size_t n, void *stream);
int gcu_dtod_async(gcu_lib *l, void *ctx, gcu_devptr dst, gcu_devptr src, size_t n, void *stream);
int gcu_host_func(gcu_lib *l, void *ctx, void *stream, size_t handle);
int gcu_host_alloc(gcu_lib *l, void *ctx, size_t n, void **p);
int gcu_host_free(gcu_lib *l, void *ctx, void *p);

// cuBLAS calls (return cublasStatus_t).
int gcu_blas_create(gcu_lib *l, void *ctx, void *stream, void **h);
int gcu_blas_destroy(gcu_lib *l, void *ctx, void *h);
int gcu_blas_version(gcu_lib *l, int *v);
int gcu_sgemm_strided_batched(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha,
                              gcu_devptr a, int lda, long long sa, gcu_devptr b, int ldb, long long sb, float beta,
                              gcu_devptr c, int ldc, long long sc, int batch);
int gcu_sgemm(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha, gcu_devptr a, int lda,
              gcu_devptr b, int ldb, float beta, gcu_devptr c, int ldc);
int gcu_sgemv(gcu_lib *l, void *ctx, void *h, int t, int m, int n, float alpha, gcu_devptr a, int lda, gcu_devptr x,
              float beta, gcu_devptr y);
int gcu_sasum(gcu_lib *l, void *ctx, void *h, int n, gcu_devptr x, float *out);
int gcu_sscal(gcu_lib *l, void *ctx, void *h, int n, float alpha, gcu_devptr x);
int gcu_blas_math(gcu_lib *l, void *ctx, void *h, int mode);

// cuDNN calls (return cudnnStatus_t). dims is N, C, H, W, O, KH, KW,
// pad H, pad W, stride H, stride W, dilation H, dilation W, groups, OH,
// OW; math a cudnnMathType_t; tf32 whether algorithms that use tensor
// cores (TF32) may be chosen; find whether to time every algorithm
// (cudnnFind*, which runs them on the device) rather than take the
// heuristics' order (where this cuDNN has no cudnnFind*, the heuristics
// decide); wsmax the largest workspace to accept.
// goddp's own statuses, outside cuDNN's: no context, cuDNN's output shape
// is not the op's (asymmetric padding), no algorithm fits.
#define GCU_DNN_NO_CONTEXT (-1)
#define GCU_DNN_SHAPE (-2)
#define GCU_DNN_NO_ALGORITHM (-3)
size_t gcu_dnn_version(gcu_lib *l);
const char *gcu_dnn_error(gcu_lib *l, int rc);
int gcu_dnn_create(gcu_lib *l, void *ctx, void *stream, void **h);
int gcu_dnn_destroy(gcu_lib *l, void *ctx, void *h);
int gcu_dnn_plan_new(gcu_lib *l, void *ctx, void *h, const int *dims, int math, int tf32, int find, size_t wsmax,
                     gcu_dnn_plan *p);
void gcu_dnn_plan_free(gcu_lib *l, gcu_dnn_plan *p);
int gcu_dnn_conv(gcu_lib *l, void *ctx, void *h, gcu_dnn_plan *p, int pass, gcu_devptr out, gcu_devptr a, gcu_devptr b,
                 float beta, gcu_devptr ws, size_t wsbytes);

// ---- bf16 GEMM for autocast (bf16_cuda.go): column-major C = alpha *
// op(A) op(B) + beta * C with A and B bfloat16, C float32, float32
// compute (cublasGemmEx). gcu_has_gemm_bf16 says whether cuBLAS has it.
int gcu_has_gemm_bf16(gcu_lib *l);
int gcu_gemm_bf16(gcu_lib *l, void *ctx, void *h, int ta, int tb, int m, int n, int k, float alpha, gcu_devptr a,
                  int lda, gcu_devptr b, int ldb, float beta, gcu_devptr c, int ldc);

#endif
