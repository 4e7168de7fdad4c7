//go:build cgo

// See shim.h. Nothing here has run against a real NCCL or GPU: this
// machine has neither. The loading and error paths have.

#include "shim.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_NON_BLOCKING 0x1

static int gdn_sym(void *h, const char *name, void **out, char *err, int cap) {
	*out = dlsym(h, name);
	if (!*out) {
		snprintf(err, (size_t)cap, "symbol %s missing", name);
		return 1;
	}
	return 0;
}

#define SYM(handle, field, name)                                             \
	if (gdn_sym(handle, name, (void **)&l->field, err, cap)) return 1;

int gdn_load_cuda(gdn_lib *l, const char *path, char *err, int cap) {
	l->cuda_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->cuda_handle) {
		const char *e = dlerror();
		snprintf(err, (size_t)cap, "%s", e ? e : "dlopen failed");
		return 1;
	}
	void *h = l->cuda_handle;
	SYM(h, cuInit, "cuInit");
	SYM(h, cuGetErrorString, "cuGetErrorString");
	SYM(h, cuDeviceGetCount, "cuDeviceGetCount");
	SYM(h, cuDeviceGet, "cuDeviceGet");
	SYM(h, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(h, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(h, cuCtxSetCurrent, "cuCtxSetCurrent");
	SYM(h, cuStreamCreate, "cuStreamCreate");
	SYM(h, cuStreamDestroy, "cuStreamDestroy_v2");
	SYM(h, cuStreamSynchronize, "cuStreamSynchronize");
	SYM(h, cuStreamWaitEvent, "cuStreamWaitEvent");
	SYM(h, cuEventCreate, "cuEventCreate");
	SYM(h, cuEventRecord, "cuEventRecord");
	SYM(h, cuEventQuery, "cuEventQuery");
	SYM(h, cuEventSynchronize, "cuEventSynchronize");
	SYM(h, cuEventDestroy, "cuEventDestroy_v2");
	SYM(h, cuMemAlloc, "cuMemAlloc_v2");
	SYM(h, cuMemFree, "cuMemFree_v2");
	SYM(h, cuMemAllocHost, "cuMemAllocHost_v2");
	SYM(h, cuMemFreeHost, "cuMemFreeHost");
	SYM(h, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(h, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	return 0;
}

int gdn_load_nccl(gdn_lib *l, const char *path, char *err, int cap) {
	l->nccl_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->nccl_handle) {
		const char *e = dlerror();
		snprintf(err, (size_t)cap, "%s", e ? e : "dlopen failed");
		return 1;
	}
	void *h = l->nccl_handle;
	SYM(h, ncclGetVersion, "ncclGetVersion");
	SYM(h, ncclGetUniqueId, "ncclGetUniqueId");
	SYM(h, ncclCommInitRank, "ncclCommInitRank");
	SYM(h, ncclCommDestroy, "ncclCommDestroy");
	SYM(h, ncclCommAbort, "ncclCommAbort");
	SYM(h, ncclCommGetAsyncError, "ncclCommGetAsyncError");
	SYM(h, ncclGetErrorString, "ncclGetErrorString");
	SYM(h, ncclAllReduce, "ncclAllReduce");
	SYM(h, ncclBroadcast, "ncclBroadcast");
	SYM(h, ncclAllGather, "ncclAllGather");
	SYM(h, ncclReduceScatter, "ncclReduceScatter");
	return 0;
}

const char *gdn_cu_error(gdn_lib *l, int code) {
	const char *s = NULL;
	if (l->cuGetErrorString && l->cuGetErrorString(code, &s) == 0 && s) return s;
	return "unknown CUDA error";
}

const char *gdn_nccl_error(gdn_lib *l, int code) {
	if (l->ncclGetErrorString) return l->ncclGetErrorString(code);
	return "unknown NCCL error";
}

int gdn_cu_init(gdn_lib *l) { return l->cuInit(0); }
int gdn_device_count(gdn_lib *l, int *n) { return l->cuDeviceGetCount(n); }

int gdn_ctx_open(gdn_lib *l, int ordinal, void **ctx) {
	int dev = 0;
	int rc = l->cuDeviceGet(&dev, ordinal);
	if (rc) return rc;
	rc = l->cuDevicePrimaryCtxRetain(ctx, dev);
	if (rc) return rc;
	return l->cuCtxSetCurrent(*ctx);
}

int gdn_ctx_close(gdn_lib *l, int ordinal) {
	int dev = 0;
	int rc = l->cuDeviceGet(&dev, ordinal);
	if (rc) return rc;
	return l->cuDevicePrimaryCtxRelease(dev);
}

#define CURRENT(ctx)                                                          \
	{                                                                         \
		int rc_ = l->cuCtxSetCurrent(ctx);                                    \
		if (rc_) return rc_;                                                  \
	}

int gdn_stream_create(gdn_lib *l, void *ctx, void **stream) {
	CURRENT(ctx);
	// A non-blocking stream: collectives do not serialise with work on
	// the legacy default stream. Device buffers are ordered against the
	// stream that produced them with events (gdn_stream_wait), see doc.go.
	return l->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING);
}

int gdn_stream_destroy(gdn_lib *l, void *ctx, void *stream) {
	CURRENT(ctx);
	return l->cuStreamDestroy(stream);
}

int gdn_stream_sync(gdn_lib *l, void *ctx, void *stream) {
	CURRENT(ctx);
	return l->cuStreamSynchronize(stream);
}

int gdn_alloc(gdn_lib *l, void *ctx, size_t n, gdn_devptr *dev, void **host) {
	CURRENT(ctx);
	int rc = l->cuMemAlloc(dev, n);
	if (rc) return rc;
	rc = l->cuMemAllocHost(host, n);
	if (rc) {
		l->cuMemFree(*dev);
		*dev = 0;
	}
	return rc;
}

int gdn_free(gdn_lib *l, void *ctx, gdn_devptr dev, void *host) {
	CURRENT(ctx);
	int rc = dev ? l->cuMemFree(dev) : 0;
	int rc2 = host ? l->cuMemFreeHost(host) : 0;
	return rc ? rc : rc2;
}

int gdn_h2d(gdn_lib *l, void *ctx, gdn_devptr dst, const void *src, size_t n, void *stream) {
	CURRENT(ctx);
	return n ? l->cuMemcpyHtoDAsync(dst, src, n, stream) : 0;
}

int gdn_d2h(gdn_lib *l, void *ctx, void *dst, gdn_devptr src, size_t n, void *stream) {
	CURRENT(ctx);
	return n ? l->cuMemcpyDtoHAsync(dst, src, n, stream) : 0;
}

int gdn_event_record(gdn_lib *l, void *ctx, void *stream, void **event) {
	CURRENT(ctx);
	int rc = l->cuEventCreate(event, CU_EVENT_DISABLE_TIMING);
	if (rc) return rc;
	rc = l->cuEventRecord(*event, stream);
	if (rc) {
		l->cuEventDestroy(*event);
		*event = NULL;
	}
	return rc;
}

int gdn_event_query(gdn_lib *l, void *ctx, void *event) {
	CURRENT(ctx);
	return l->cuEventQuery(event);
}

// Blocks the calling thread until the work before event has run (or the
// communicator's abort has ended it).
int gdn_event_sync(gdn_lib *l, void *ctx, void *event) {
	CURRENT(ctx);
	return l->cuEventSynchronize(event);
}

int gdn_event_destroy(gdn_lib *l, void *ctx, void *event) {
	CURRENT(ctx);
	return l->cuEventDestroy(event);
}

// Records an event on a stream given as an integer (a caller's CUstream,
// 0 for the legacy default stream).
int gdn_event_record_on(gdn_lib *l, void *ctx, uintptr_t stream, void **event) {
	return gdn_event_record(l, ctx, (void *)stream, event);
}

// Makes stream wait (on the GPU) for event, recorded on another stream.
int gdn_stream_wait(gdn_lib *l, void *ctx, void *stream, void *event) {
	CURRENT(ctx);
	return l->cuStreamWaitEvent(stream, event, 0);
}

// Makes stream wait for a caller's event (a CUevent given as an integer).
int gdn_stream_wait_for(gdn_lib *l, void *ctx, void *stream, uintptr_t event) {
	return gdn_stream_wait(l, ctx, stream, (void *)event);
}

// Records a caller's event (created by the caller, given as an integer) on
// stream: the stream-ordered all-reduce's end event.
int gdn_event_record_into(gdn_lib *l, void *ctx, uintptr_t event, void *stream) {
	CURRENT(ctx);
	return l->cuEventRecord((void *)event, stream);
}

int gdn_version(gdn_lib *l, int *v) { return l->ncclGetVersion(v); }

int gdn_unique_id_get(gdn_lib *l, char *out) {
	gdn_unique_id id;
	int rc = l->ncclGetUniqueId(&id);
	if (rc == 0) memcpy(out, id.internal, GDN_UNIQUE_ID_BYTES);
	return rc;
}

int gdn_comm_init(gdn_lib *l, void *ctx, void **comm, int nranks, const char *idbytes, int rank) {
	if (l->cuCtxSetCurrent(ctx)) return 1; // ncclUnhandledCudaError
	gdn_unique_id id;
	memcpy(id.internal, idbytes, GDN_UNIQUE_ID_BYTES);
	return l->ncclCommInitRank(comm, nranks, id, rank);
}

int gdn_comm_destroy(gdn_lib *l, void *ctx, void *comm) {
	if (l->cuCtxSetCurrent(ctx)) return 1;
	return l->ncclCommDestroy(comm);
}

int gdn_comm_abort(gdn_lib *l, void *ctx, void *comm) {
	if (l->cuCtxSetCurrent(ctx)) return 1;
	return l->ncclCommAbort(comm);
}

int gdn_comm_async_error(gdn_lib *l, void *comm, int *async) { return l->ncclCommGetAsyncError(comm, async); }

#define NCCL_CURRENT(ctx)                                                     \
	if (l->cuCtxSetCurrent(ctx)) return 1;

int gdn_allreduce(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t count, int dt, int op, void *comm, void *stream) {
	NCCL_CURRENT(ctx);
	return l->ncclAllReduce((const void *)send, (void *)recv, count, dt, op, comm, stream);
}

int gdn_broadcast(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t count, int dt, int root, void *comm, void *stream) {
	NCCL_CURRENT(ctx);
	return l->ncclBroadcast((const void *)send, (void *)recv, count, dt, root, comm, stream);
}

int gdn_allgather(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t sendcount, int dt, void *comm, void *stream) {
	NCCL_CURRENT(ctx);
	return l->ncclAllGather((const void *)send, (void *)recv, sendcount, dt, comm, stream);
}

int gdn_reduce_scatter(gdn_lib *l, void *ctx, gdn_devptr send, gdn_devptr recv, size_t recvcount, int dt, int op, void *comm, void *stream) {
	NCCL_CURRENT(ctx);
	return l->ncclReduceScatter((const void *)send, (void *)recv, recvcount, dt, op, comm, stream);
}
