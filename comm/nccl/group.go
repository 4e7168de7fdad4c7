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
	"sync"
	"time"
	"unsafe"

	"goddp/comm/backend"
)

// group is the nccl backend.ProcessGroup: one NCCL communicator on one GPU,
// with one CUDA stream for all its collectives. Host Buffers are staged
// through pinned host memory and device scratch from a pool; DeviceBuffers
// go straight to NCCL. Ops are enqueued on the stream in call order (under
// mu) and a watcher goroutine completes their Works in that order by
// polling a CUDA event recorded after each.
type group struct {
	lib     *library
	rank    int
	size    int
	device  int
	timeout time.Duration
	logf    func(format string, args ...any)

	ctx    unsafe.Pointer // CUcontext (the device's primary context)
	stream unsafe.Pointer // CUstream
	comm   unsafe.Pointer // ncclComm_t

	mu      sync.Mutex // serialises enqueueing, protects seq and closed
	seq     uint64
	closed  bool
	bmu     sync.Mutex // protects broken; never held while waiting
	broken  error
	pending chan *op
	watched chan struct{} // closed when the watcher returns
	pool    *stagingPool
	once    sync.Once
	closeEr error
}

var (
	_ backend.ProcessGroup    = (*group)(nil)
	_ backend.AllGatherer     = (*group)(nil)
	_ backend.ReduceScatterer = (*group)(nil)
	_ DeviceCollectives       = (*group)(nil)
)

// op is one enqueued collective.
type op struct {
	name     string
	bytes    int
	seq      uint64
	deadline time.Time
	event    unsafe.Pointer
	done     func() // on success, before the Work completes (copy-out, staging release)
	w        *work
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
	g := &group{rank: opts.Rank, size: opts.Size, device: opts.Device, timeout: opts.Timeout, logf: opts.Logf}
	if g.timeout <= 0 {
		g.timeout = backend.DefaultTimeout
	}
	if g.logf == nil {
		g.logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
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
		return nil, fmt.Errorf("%w: device %d requested, %d present (one GPU per local rank)", ErrNoDevice, g.device, n)
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
	g.pending = make(chan *op, 1024)
	g.watched = make(chan struct{})
	go g.watch()
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

// enqueue runs launch under the lock, records the completion event and
// hands the op to the watcher. launch returns an error, or nil once its
// work is on the stream.
func (g *group) enqueue(name string, bytes int, launch func() error, done func(), undo func()) backend.Work {
	g.mu.Lock()
	defer g.mu.Unlock()
	fail := func(kind error, detail string, cause error) backend.Work {
		if undo != nil {
			undo()
		}
		return failed(&backend.OpError{Kind: kind, Op: name, Seq: g.seq, Bytes: bytes, Rank: g.rank, Detail: detail, Err: cause})
	}
	g.seq++
	if g.closed {
		return fail(backend.ErrClosed, "", nil)
	}
	if broken := g.brokenErr(); broken != nil {
		return fail(backend.ErrPeerFailed, "the communicator was aborted by an earlier failure", broken)
	}
	if err := launch(); err != nil {
		return fail(backend.ErrPeerFailed, "enqueueing failed", err)
	}
	var ev unsafe.Pointer
	if rc := C.gdn_event_record(g.lib.l, g.ctx, g.stream, &ev); rc != 0 {
		// The work is on the stream but cannot be watched: wait for it.
		err := g.lib.cuErr("cuEventRecord", rc)
		if rc := C.gdn_stream_sync(g.lib.l, g.ctx, g.stream); rc != 0 {
			g.abort(err)
			return fail(backend.ErrPeerFailed, "", err)
		}
		done()
		return failed(nil)
	}
	o := &op{name: name, bytes: bytes, seq: g.seq, deadline: time.Now().Add(g.timeout), event: ev, done: done, w: newWork()}
	g.pending <- o
	return o.w
}

// watch completes ops in stream order.
func (g *group) watch() {
	defer close(g.watched)
	for o := range g.pending {
		err := g.await(o)
		C.gdn_event_destroy(g.lib.l, g.ctx, o.event)
		if err == nil {
			o.done()
		}
		o.w.Complete(err)
	}
}

// await polls o's event, NCCL's asynchronous error and o's deadline.
func (g *group) await(o *op) error {
	opErr := func(kind error, detail string, cause error) error {
		return &backend.OpError{Kind: kind, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: g.rank, Detail: detail, Err: cause}
	}
	if broken := g.brokenErr(); broken != nil {
		return opErr(backend.ErrPeerFailed, "the communicator was aborted by an earlier failure", broken)
	}
	sleep := 5 * time.Microsecond
	for {
		switch rc := C.gdn_event_query(g.lib.l, g.ctx, o.event); rc {
		case 0:
			return nil
		case cudaErrorNotReady:
		default:
			err := g.lib.cuErr("cuEventQuery", rc)
			g.abort(err)
			return opErr(backend.ErrPeerFailed, "", err)
		}
		var async C.int
		if rc := C.gdn_comm_async_error(g.lib.l, g.comm, &async); rc == 0 && async != 0 && async != ncclInProgress {
			err := g.lib.ncclErr("asynchronous error", async)
			g.abort(err)
			return opErr(backend.ErrPeerFailed, "a peer failed or the network broke", err)
		}
		if time.Now().After(o.deadline) {
			err := fmt.Errorf("not completed after %v; communicator aborted", g.timeout)
			g.abort(err)
			return opErr(backend.ErrTimeout, "a rank did not issue it, or is stuck", err)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// abort makes the communicator unusable and ends its pending kernels.
func (g *group) abort(cause error) {
	g.bmu.Lock()
	defer g.bmu.Unlock()
	if g.broken != nil {
		return
	}
	g.broken = cause
	if rc := C.gdn_comm_abort(g.lib.l, g.ctx, g.comm); rc != 0 {
		g.logf("nccl: rank %d: ncclCommAbort: %v", g.rank, g.lib.ncclErr("ncclCommAbort", rc))
	}
	g.logf("nccl: rank %d: communicator aborted: %v", g.rank, cause)
}

func (g *group) brokenErr() error {
	g.bmu.Lock()
	defer g.bmu.Unlock()
	return g.broken
}

// Close waits for the enqueued ops (each bounded by the timeout), then
// destroys the communicator, the stream and the staging memory. Later ops
// fail with backend.ErrClosed.
func (g *group) Close() error {
	g.once.Do(func() {
		g.mu.Lock()
		g.closed = true
		close(g.pending)
		g.mu.Unlock()
		<-g.watched
		var errs []error
		if g.brokenErr() == nil {
			if rc := C.gdn_comm_destroy(g.lib.l, g.ctx, g.comm); rc != 0 {
				errs = append(errs, g.lib.ncclErr("ncclCommDestroy", rc))
			}
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
