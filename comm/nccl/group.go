//go:build cgo

package nccl

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// group is the nccl backend.ProcessGroup: one NCCL communicator on one GPU,
// with one non-blocking CUDA stream for all its collectives. Host Buffers
// are staged through pinned host memory and device scratch from a pool;
// DeviceBuffers go straight to NCCL. The engine (engine.go) orders, issues,
// watches and times out the ops.
type group struct {
	*engine
	lib    *library
	rank   int
	size   int
	device int

	ctx    unsafe.Pointer // CUcontext (the device's primary context)
	stream unsafe.Pointer // CUstream
	comm   unsafe.Pointer // ncclComm_t
	pool   *stagingPool

	once    sync.Once
	closeEr error
}

var (
	_ backend.ProcessGroup    = (*group)(nil)
	_ backend.AllGatherer     = (*group)(nil)
	_ backend.ReduceScatterer = (*group)(nil)
	_ DeviceCollectives       = (*group)(nil)
)

// cCalls is the engine's libCalls over the loaded libraries.
type cCalls struct{ g *group }

func (c cCalls) recordEvent() (unsafe.Pointer, error) {
	var ev unsafe.Pointer
	if rc := C.gdn_event_record(c.g.lib.l, c.g.ctx, c.g.stream, &ev); rc != 0 {
		return nil, c.g.lib.cuErr("cuEventRecord", rc)
	}
	return ev, nil
}

func (c cCalls) queryEvent(ev unsafe.Pointer) (bool, error) {
	switch rc := C.gdn_event_query(c.g.lib.l, c.g.ctx, ev); rc {
	case 0:
		return true, nil
	case cudaErrorNotReady:
		return false, nil
	default:
		return false, c.g.lib.cuErr("cuEventQuery", rc)
	}
}

func (c cCalls) syncEvent(ev unsafe.Pointer) error {
	if rc := C.gdn_event_sync(c.g.lib.l, c.g.ctx, ev); rc != 0 {
		return c.g.lib.cuErr("cuEventSynchronize", rc)
	}
	return nil
}

func (c cCalls) destroyEvent(ev unsafe.Pointer) {
	C.gdn_event_destroy(c.g.lib.l, c.g.ctx, ev)
}

func (c cCalls) syncStream() error {
	if rc := C.gdn_stream_sync(c.g.lib.l, c.g.ctx, c.g.stream); rc != 0 {
		return c.g.lib.cuErr("cuStreamSynchronize", rc)
	}
	return nil
}

func (c cCalls) asyncError() error {
	var async C.int
	if rc := C.gdn_comm_async_error(c.g.lib.l, c.g.comm, &async); rc == 0 && async != 0 && async != ncclInProgress {
		return c.g.lib.ncclErr("asynchronous error", async)
	}
	return nil
}

func (c cCalls) abortComm() error {
	if rc := C.gdn_comm_abort(c.g.lib.l, c.g.ctx, c.g.comm); rc != 0 {
		return c.g.lib.ncclErr("ncclCommAbort", rc)
	}
	return nil
}

func (c cCalls) destroyComm() error {
	if rc := C.gdn_comm_destroy(c.g.lib.l, c.g.ctx, c.g.comm); rc != 0 {
		return c.g.lib.ncclErr("ncclCommDestroy", rc)
	}
	return nil
}

// New creates an NCCL communicator over opts.Size ranks on GPU opts.Device:
// rank 0 asks NCCL for a unique id and publishes it in opts.Store, the
// others read it, and all call ncclCommInitRank. Every rank must call New.
func New(ctx context.Context, opts Options) (backend.ProcessGroup, error) {
	if opts.Size < 1 || opts.Rank < 0 || opts.Rank >= opts.Size {
		return nil, fmt.Errorf("%w: nccl: rank %d of %d", backend.ErrBadArgument, opts.Rank, opts.Size)
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: nccl: a rendezvous store is needed to share NCCL's unique id", backend.ErrBadArgument)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	g := &group{rank: opts.Rank, size: opts.Size, device: opts.Device}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = backend.DefaultTimeout
	}
	logf := opts.Logf
	if logf == nil {
		logf = stderrLogf(opts.Rank, os.Stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	lib, err := load(opts.LibraryPath)
	if err != nil {
		return nil, err
	}
	g.lib = lib
	n, err := lib.devices()
	if err != nil {
		return nil, err
	}
	if g.device < 0 || g.device >= n {
		return nil, fmt.Errorf("%w: device %d requested, %d visible (one GPU per local rank; CUDA_VISIBLE_DEVICES=%q)", ErrNoDevice, g.device, n, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	var cctx, stream unsafe.Pointer
	if rc := C.gdn_ctx_open(lib.l, C.int(g.device), &cctx); rc != 0 {
		return nil, lib.cuErr(fmt.Sprintf("opening device %d", g.device), rc)
	}
	g.ctx = cctx
	if rc := C.gdn_stream_create(lib.l, g.ctx, &stream); rc != 0 {
		C.gdn_ctx_close(lib.l, C.int(g.device))
		return nil, lib.cuErr("cuStreamCreate", rc)
	}
	g.stream = stream
	g.pool = &stagingPool{lib: lib, ctx: g.ctx}
	undo := func(err error) (backend.ProcessGroup, error) {
		C.gdn_stream_destroy(lib.l, g.ctx, g.stream)
		C.gdn_ctx_close(lib.l, C.int(g.device))
		return nil, err
	}

	id, err := exchangeID(ctx, lib, opts)
	if err != nil {
		return undo(err)
	}
	type result struct {
		comm unsafe.Pointer
		rc   C.int
	}
	res := make(chan result, 1)
	go func() {
		// ncclCommInitRank blocks until every rank has called it; it
		// cannot be interrupted, so a timeout leaves this goroutine behind.
		var c unsafe.Pointer
		cid := C.CBytes(id)
		defer C.free(cid)
		rc := C.gdn_comm_init(lib.l, g.ctx, &c, C.int(g.size), (*C.char)(cid), C.int(g.rank))
		res <- result{c, rc}
	}()
	select {
	case r := <-res:
		if r.rc != 0 {
			return undo(lib.ncclErr("ncclCommInitRank", r.rc))
		}
		g.comm = r.comm
	case <-ctx.Done():
		return undo(fmt.Errorf("%w: nccl: rank %d waiting for the other ranks in ncclCommInitRank: %w", backend.ErrTimeout, g.rank, ctx.Err()))
	}
	g.engine = newEngine(cCalls{g}, g.rank, timeout, logf)
	return g, nil
}

// exchangeID gives every rank rank 0's ncclUniqueId through the store.
func exchangeID(ctx context.Context, lib *library, opts Options) ([]byte, error) {
	key := opts.Prefix + "nccl/unique_id"
	if opts.Rank == 0 {
		id := make([]byte, C.GDN_UNIQUE_ID_BYTES)
		if rc := C.gdn_unique_id_get(lib.l, (*C.char)(unsafe.Pointer(&id[0]))); rc != 0 {
			return nil, lib.ncclErr("ncclGetUniqueId", rc)
		}
		if err := opts.Store.Set(ctx, key, id); err != nil {
			return nil, fmt.Errorf("nccl: publishing the unique id: %w", err)
		}
		return id, nil
	}
	id, err := opts.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d reading rank 0's unique id: %w", opts.Rank, err)
	}
	if len(id) != C.GDN_UNIQUE_ID_BYTES {
		return nil, fmt.Errorf("%w: nccl: unique id of %d bytes in the store, want %d", backend.ErrBadArgument, len(id), C.GDN_UNIQUE_ID_BYTES)
	}
	return id, nil
}

func (g *group) Rank() int       { return g.rank }
func (g *group) Size() int       { return g.size }
func (g *group) Backend() string { return "nccl" }
func (g *group) Device() int     { return g.device }
func (g *group) Stream() uintptr { return uintptr(g.stream) }

// Close waits for the queued ops (each bounded by the timeout), then
// destroys the communicator, the stream and the staging memory. Later ops
// fail with backend.ErrClosed.
func (g *group) Close() error {
	g.once.Do(func() {
		healthy, leaked, err := g.engine.close()
		errs := []error{err}
		if leaked {
			g.closeEr = err
			return
		}
		if healthy {
			errs = append(errs, g.pool.free())
		}
		if rc := C.gdn_stream_destroy(g.lib.l, g.ctx, g.stream); rc != 0 {
			errs = append(errs, g.lib.cuErr("cuStreamDestroy", rc))
		}
		if rc := C.gdn_ctx_close(g.lib.l, C.int(g.device)); rc != 0 {
			errs = append(errs, g.lib.cuErr("cuDevicePrimaryCtxRelease", rc))
		}
		g.closeEr = errors.Join(errs...)
	})
	return g.closeEr
}
