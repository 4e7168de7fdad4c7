//go:build mpi

package mpi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// All of a group's MPI calls run on one goroutine locked to one OS thread
// (MPI_THREAD_FUNNELED): it initialises MPI, issues every op as a
// nonblocking MPI call in the order the ops were submitted, drives MPI's
// progress engine while requests are pending, completes the Works, and
// finalizes MPI on Close. Several requests are in flight at once, so a Send
// waiting for its matching Recv never blocks the ops behind it.

// op is one submitted operation: a single nonblocking MPI call.
type op struct {
	name     string
	bytes    int
	seq      uint64
	deadline time.Time
	// issue starts the MPI call on the MPI thread.
	issue func(req *C.MPI_Request) C.int
	// after, if set, runs on the MPI thread once the call succeeded (Avg's division).
	after func()
	pin   runtime.Pinner
	w     *work
}

// task is what the MPI thread receives: an op to issue, or a close request.
type task struct {
	op    *op
	close chan error
}

// progressSlice bounds one C-side polling loop, after which the thread
// returns to Go to take new ops and check deadlines.
const progressSlice = 2e-3 // seconds

// run is the MPI thread's body. It never returns while ops it pinned may
// still be written by MPI (see park).
func (g *group) run(ctx context.Context, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := g.start(ctx); err != nil {
		ready <- err
		return
	}
	ready <- nil
	var closing chan error
	for closing == nil {
		if len(g.pending) == 0 {
			closing = g.handle(<-g.tasks)
			continue
		}
	drain:
		for closing == nil {
			select {
			case t := <-g.tasks:
				closing = g.handle(t)
			default:
				break drain
			}
		}
		g.progress()
		g.checkDeadlines(time.Now())
	}
	closing <- g.shutdown()
	g.park()
}

// start initialises MPI (unless someone already did) and duplicates
// MPI_COMM_WORLD into the group's own communicator.
func (g *group) start(ctx context.Context) error {
	var provided, owner C.int
	rc := C.gdm_init(C.MPI_THREAD_FUNNELED, &provided, &owner)
	if rc == -2 {
		return fmt.Errorf("%w: %w", ErrMPI, errFinalized)
	}
	if err := mpiError("MPI_Init_thread", rc); err != nil {
		return err
	}
	g.owner = owner != 0
	if !g.owner && provided < C.MPI_THREAD_MULTIPLE {
		// Someone else initialised MPI on another thread; calling it from
		// this one is only safe with MPI_THREAD_MULTIPLE.
		return fmt.Errorf("%w: MPI is already initialised in this process with thread level %d; a second group needs MPI_THREAD_MULTIPLE (one mpi group per process: close the first)", ErrMPI, int(provided))
	}
	var rank, size C.int
	if err := mpiError("MPI_Comm_rank/size", C.gdm_world(&rank, &size)); err != nil {
		return g.abandon(err)
	}
	g.rank, g.size = int(rank), int(size)
	g.ops = (*C.gdm_ops)(C.malloc(C.size_t(unsafe.Sizeof(C.gdm_ops{}))))
	if err := mpiError("MPI_Op_create", C.gdm_ops_create(g.ops)); err != nil {
		return g.abandon(err)
	}
	// MPI_Comm_idup is a collective; polling it keeps ctx's deadline.
	var req C.MPI_Request
	g.comm = C.gdm_comm_null()
	if err := mpiError("MPI_Comm_idup", C.gdm_idup_world(&g.comm, &req)); err != nil {
		return g.abandon(err)
	}
	reqs := []C.MPI_Request{req}
	idx, errs := make([]C.int, 1), make([]C.int, 1)
	for {
		var done C.int
		if err := mpiError("MPI_Testsome", C.gdm_testsome(&reqs[0], 1, progressSlice, &idx[0], &errs[0], &done)); err != nil {
			return g.abandon(err)
		}
		if done > 0 {
			if err := mpiError("MPI_Comm_idup", errs[0]); err != nil {
				return g.abandon(err)
			}
			break
		}
		if ctx.Err() != nil {
			// The request may still complete; leave MPI initialised rather
			// than finalize with it pending.
			return fmt.Errorf("mpi: duplicating MPI_COMM_WORLD on rank %d: %w", g.rank, ctx.Err())
		}
	}
	return mpiError("MPI_Comm_set_errhandler", C.gdm_comm_setup(g.comm))
}

// abandon releases what start made and finalizes MPI if start initialised it.
func (g *group) abandon(err error) error {
	if g.ops != nil {
		C.gdm_ops_free(g.ops)
		C.free(unsafe.Pointer(g.ops))
		g.ops = nil
	}
	if g.owner {
		C.gdm_finalize()
	}
	return err
}

// handle issues an op, or returns the reply channel of a close request.
func (g *group) handle(t task) chan error {
	if t.close != nil {
		return t.close
	}
	o := t.op
	g.seq++
	o.seq = g.seq
	if g.broken != nil {
		g.fail(o, fmt.Errorf("mpi: %s #%d not started: %w", o.name, o.seq, g.broken))
		return nil
	}
	var req C.MPI_Request
	if err := mpiError(o.name, o.issue(&req)); err != nil {
		g.fail(o, g.opError(o, backend.ErrBadArgument, "MPI refused the call", err))
		return nil
	}
	g.pending = append(g.pending, o)
	g.reqs = append(g.reqs, req)
	return nil
}

// progress polls the pending requests once and completes those that finished.
func (g *group) progress() {
	n := len(g.reqs)
	if cap(g.idx) < n {
		g.idx, g.errs = make([]C.int, n), make([]C.int, n)
	}
	var done C.int
	if err := mpiError("MPI_Testsome", C.gdm_testsome(&g.reqs[0], C.int(n), progressSlice, &g.idx[0], &g.errs[0], &done)); err != nil {
		g.breakAll(g.opError(g.pending[0], backend.ErrPeerFailed, "progress failed", err))
		return
	}
	if done == 0 {
		return
	}
	for i := 0; i < int(done); i++ {
		o := g.pending[g.idx[i]]
		g.pending[g.idx[i]] = nil
		if err := mpiError(o.name, g.errs[i]); err != nil {
			o.pin.Unpin()
			o.w.Complete(g.opError(o, backend.ErrPeerFailed, "", err))
			continue
		}
		if o.after != nil {
			o.after()
		}
		o.pin.Unpin()
		o.w.Complete(nil)
	}
	// Compact, keeping submission order.
	k := 0
	for i, o := range g.pending {
		if o != nil {
			g.pending[k], g.reqs[k] = o, g.reqs[i]
			k++
		}
	}
	clear(g.pending[k:])
	g.pending, g.reqs = g.pending[:k], g.reqs[:k]
}

// checkDeadlines breaks the group when the oldest pending op is overdue.
func (g *group) checkDeadlines(now time.Time) {
	for _, o := range g.pending {
		if now.After(o.deadline) {
			g.breakAll(g.opError(o, backend.ErrTimeout,
				fmt.Sprintf("not completed after %v (a rank did not issue it, or is stuck); MPI cannot cancel a collective, so this group is now unusable", g.timeout), nil))
			return
		}
	}
}

// breakAll fails every pending op with err and refuses later ones. The
// failed requests may still be written by MPI, so their buffers stay pinned.
func (g *group) breakAll(err error) {
	g.broken = err
	for _, o := range g.pending {
		o.w.Complete(err)
	}
	g.leaked = append(g.leaked, g.pending...)
	g.pending, g.reqs = nil, nil
}

// fail completes an op that never reached MPI.
func (g *group) fail(o *op, err error) {
	o.pin.Unpin()
	o.w.Complete(err)
}

func (g *group) opError(o *op, kind error, detail string, cause error) error {
	return &backend.OpError{Kind: kind, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: g.rank, Detail: detail, Err: cause}
}

// shutdown fails what is still pending, frees the communicator and, when
// this group initialised MPI and no request is left in flight, finalizes it.
func (g *group) shutdown() error {
	if len(g.pending) > 0 {
		o := g.pending[0]
		g.breakAll(g.opError(o, backend.ErrClosed, "group closed with the op pending", nil))
	}
	var errs []error
	if g.comm != C.gdm_comm_null() && len(g.leaked) == 0 {
		errs = append(errs, mpiError("MPI_Comm_free", C.gdm_comm_free(&g.comm)))
	}
	if g.ops != nil && len(g.leaked) == 0 {
		C.gdm_ops_free(g.ops)
		C.free(unsafe.Pointer(g.ops))
		g.ops = nil
	}
	if g.owner {
		if len(g.leaked) > 0 {
			errs = append(errs, fmt.Errorf("%w: not finalizing MPI: %d op(s) still in flight after a failure (%v)", ErrMPI, len(g.leaked), g.broken))
		} else {
			errs = append(errs, mpiError("MPI_Finalize", C.gdm_finalize()))
		}
	}
	return errors.Join(errs...)
}

// park keeps the buffers of requests that MPI may still write pinned and
// reachable until the process exits; it returns at once when there are none.
func (g *group) park() {
	if len(g.leaked) == 0 {
		return
	}
	g.logf("mpi: rank %d: %d request(s) left in flight after %v; their buffers stay pinned until exit", g.rank, len(g.leaked), g.broken)
	<-g.never
	runtime.KeepAlive(g.leaked)
}
