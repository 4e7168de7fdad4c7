// C side of the nccl backend: libnccl.so.2 and libcuda.so.1 are opened at
// run time with dlopen and called through function pointers declared here,
// so that neither NCCL's nor CUDA's headers are needed to build goddp.
// The declarations follow NCCL 2.x's nccl.h and CUDA's driver API (cuda.h)
// on 64-bit Linux.
#ifndef GODDP_NCCL_SHIM_H
#define GODDP_NCCL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define GDN_UNIQUE_ID_BYTES 128

// ncclUniqueId: passed by value to ncclCommInitRank.
typedef struct { char internal[GDN_UNIQUE_ID_BYTES]; } gdn_unique_id;

typedef unsigned long long gdn_devptr; // CUdeviceptr

typedef struct {
	void *nccl_handle, *cuda_handle;
	// NCCL (ncclResult_t is an int enum; ncclComm_t and cudaStream_t are pointers).
	int (*ncclGetVersion)(int *);
	int (*ncclGetUniqueId)(gdn_unique_id *);
	int (*ncclCommInitRank)(void **comm, int nranks, gdn_unique_id id, int rank);
	int (*ncclCommDestroy)(void *comm);
	int (*ncclCommAbort)(void *comm);
	int (*ncclCommGetAsyncError)(void *comm, int *async);
	const char *(*ncclGetErrorString)(int);
	int (*ncclAllReduce)(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream);
	int (*ncclBroadcast)(const void *send, void *recv, size_t count, int dtype, int root, void *comm, void *stream);
	int (*ncclAllGather)(const void *send, void *recv, size_t sendcount, int dtype, void *comm, void *stream);
	int (*ncclReduceScatter)(const void *send, void *recv, size_t recvcount, int dtype, int op, void *comm, void *stream);
	// CUDA driver API (CUresult is an int enum).
	int (*cuInit)(unsigned);
	int (*cuGetErrorString)(int, const char **);
	int (*cuDeviceGetCount)(int *);
	int (*cuDeviceGet)(int *, int);
	int (*cuDevicePrimaryCtxRetain)(void **ctx, int dev);
	int (*cuDevicePrimaryCtxRelease)(int dev);
	int (*cuCtxSetCurrent)(void *ctx);
	int (*cuStreamCreate)(void **stream, unsigned flags);
	int (*cuStreamDestroy)(void *stream);
	int (*cuStreamSynchronize)(void *stream);
	int (*cuStreamWaitEvent)(void *stream, void *event, unsigned flags);
	int (*cuEventCreate)(void **event, unsigned flags);
	int (*cuEventRecord)(void *event, void *stream);
	int (*cuEventQuery)(void *event);
	int (*cuEventSynchronize)(void *event);
	int (*cuEventDestroy)(void *event);
	int (*cuMemAlloc)(gdn_devptr *, size_t);
	int (*cuMemFree)(gdn_devptr);
	int (*cuMemAllocHost)(void **, size_t);
	int (*cuMemFreeHost)(void *);
	int (*cuMemcpyHtoDAsync)(gdn_devptr dst, const void *src, size_t n, void *stream);
	int (*cuMemcpyDtoHAsync)(void *dst, gdn_devptr src, size_t n, void *stream);
} gdn_lib;

// Loading: 0 on success, else a message in err.
int gdn_load_cuda(gdn_lib *l, const char *path, char *err, int cap);
int gdn_load_nccl(gdn_lib *l, const char *path, char *err, int cap);

const char *gdn_cu_error(gdn_lib *l, int code);
const char *gdn_nccl_error(gdn_lib *l, int code);

// CUDA calls (return CUresult). Each call that needs a context makes ctx current first.
int gdn_cu_init(gdn_lib *l);
int gdn_device_count(gdn_lib *l, int *n);
int gdn_ctx_open(gdn_lib *l, int dev, void **ctx);
int gdn_ctx_close(gdn_lib *l, int dev);
int gdn_stream_create(gdn_lib *l, void *ctx, void **stream);
int gdn_stream_destroy(gdn_lib *l, void *ctx, void *stream);
int gdn_stream_sync(gdn_lib *l, void *ctx, void *stream);
int gdn_alloc(gdn_lib *l, void *ctx, size_t n, gdn_devptr *dev, void **host);
int gdn_free(gdn_lib *l, void *ctx, gdn_devptr dev, void *host);
int gdn_h2d(gdn_lib *l, void *ctx, gdn_devptr dst, const void *src, size_t n, void *stream);
int gdn_d2h(gdn_lib *l, void *ctx, void *dst, gdn_devptr src, size_t n, void *stream);
int gdn_event_record(gdn_lib *l, void *ctx, void *stream, void **event);
int gdn_event_query(gdn_lib *l, void *ctx, void *event);
int gdn_event_sync(gdn_lib *l, void *ctx, void *event);
int gdn_event_destroy(gdn_lib *l, void *ctx, void *event);
int gdn_event_record_on(gdn_lib *l, void *ctx, uintptr_t stream, void **event);
int gdn_stream_wait(gdn_lib *l, void *ctx, void *stream, void *event);
// The stream-ordered all-reduce's events are the caller's (goddp/cuda's
// markers), passed as integers as a DeviceBuffer's Stream is.
int gdn_stream_wait_for(gdn_lib *l, void *ctx, void *stream, uintptr_t event);
int gdn_event_record_into(gdn_lib *l, void *ctx, uintptr_t event, void *stream);

// NCCL calls (return ncclResult_t).
int gdn_version(gdn_lib *l, int *v);
int gdn_unique_id_get(gdn_lib *l, char *out);
int gdn_comm_init(gdn_lib *l, void *ctx, void **comm, int nranks, const char *id, int rank);
int gdn_comm_destroy(gdn_lib *l, void *ctx, void *comm);
int gdn_comm_abort(gdn_lib *l, void *ctx, void *comm);
int gdn_comm_async_error(gdn_lib *l, void *comm, int *async);
int gdn_allreduce(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t count, int dt, int op, void *comm, void *stream);
int gdn_broadcast(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t count, int dt, int root, void *comm, void *stream);
int gdn_allgather(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t sendcount, int dt, void *comm, void *stream);
int gdn_reduce_scatter(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t recvcount, int dt, int op, void *comm, void *stream);

#endif
