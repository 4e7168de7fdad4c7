//go:build mpi

package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// group is a backend.ProcessGroup over a duplicate of MPI_COMM_WORLD.
type group struct {
	timeout time.Duration
	logf    func(format string, args ...any)
	tasks   chan task
	never   chan struct{} // never closed; park waits on it
	mu      sync.RWMutex  // closed, and sends on tasks: no op is queued behind the close
	closed  bool
	once    sync.Once
	closeEr error

	// Set by start before New returns, read-only afterwards.
	rank, size int

	// Owned by the MPI thread.
	owner   bool
	comm    C.MPI_Comm
	ops     *C.gdm_ops
	seq     uint64
	pending []*op
	reqs    []C.MPI_Request
	idx     []C.int
	errs    []C.int
	broken  error
	leaked  []*op
}

var (
	_ backend.ProcessGroup    = (*group)(nil)
	_ backend.AllGatherer     = (*group)(nil)
	_ backend.ReduceScatterer = (*group)(nil)
	_ backend.RootReducer     = (*group)(nil)
	_ backend.Gatherer        = (*group)(nil)
	_ backend.Scatterer       = (*group)(nil)
	_ backend.AllToAller      = (*group)(nil)
	_ backend.PointToPoint    = (*group)(nil)
)

// New joins the MPI job this process was started in (MPI_COMM_WORLD: rank
// and size come from MPI) and returns its process group. It initialises
// MPI on a dedicated thread; Close finalizes it, after which MPI cannot be
// used again in this process. Only one group per process is supported.
func New(ctx context.Context, opts Options) (backend.ProcessGroup, error) {
	if !opts.AllowSingleton && !UnderLauncher() {
		return nil, ErrNotUnderMPI
	}
	if ctx == nil {
		ctx = context.Background()
	}
	g := &group{
		timeout: opts.Timeout,
		logf:    opts.Logf,
		tasks:   make(chan task, 256),
		never:   make(chan struct{}),
	}
	if g.timeout <= 0 {
		g.timeout = backend.DefaultTimeout
	}
	if g.logf == nil {
		// As comm's tcp and shm backends: stderr on rank 0 (known once
		// MPI is initialised, before anything is logged), silence elsewhere.
		g.logf = func(format string, args ...any) {
			if g.rank == 0 {
				fmt.Fprintf(os.Stderr, format+"\n", args...)
			}
		}
	}
	ready := make(chan error, 1)
	go g.run(ctx, ready)
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		// MPI_Init_thread cannot be interrupted; the thread finishes it alone.
		return nil, fmt.Errorf("mpi: initialising MPI: %w", ctx.Err())
	}
	return g, nil
}

func (g *group) Rank() int       { return g.rank }
func (g *group) Size() int       { return g.size }
func (g *group) Backend() string { return "mpi" }

// Close fails pending ops with backend.ErrClosed, frees the communicator and
// finalizes MPI (a collective: every rank must close). Later ops fail with
// backend.ErrClosed. It waits at most the group's timeout.
func (g *group) Close() error {
	g.once.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		reply := make(chan error, 1)
		g.tasks <- task{close: reply}
		select {
		case g.closeEr = <-reply:
		case <-time.After(g.timeout):
			g.closeEr = fmt.Errorf("%w: closing the MPI group on rank %d took longer than %v (MPI_Finalize waits for every rank)", backend.ErrTimeout, g.rank, g.timeout)
		}
	})
	return g.closeEr
}

// submit hands an op to the MPI thread, pinning its buffers until it completes.
func (g *group) submit(o *op, bufs ...backend.Buffer) backend.Work {
	o.w = newWork()
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return failed(&backend.OpError{Kind: backend.ErrClosed, Op: o.name, Bytes: o.bytes, Rank: g.rank})
	}
	for _, b := range bufs {
		if len(b.Bytes) > 0 {
			o.pin.Pin(&b.Bytes[0])
		}
	}
	o.deadline = time.Now().Add(g.timeout)
	// The MPI thread runs until it takes the close request, which Close
	// sends only after no submit holds the read lock.
	g.tasks <- task{op: o}
	return o.w
}

// bad returns a failed Work for an invalid argument.
func (g *group) bad(name string, bytes int, format string, args ...any) backend.Work {
	return failed(&backend.OpError{Kind: backend.ErrBadArgument, Op: name, Bytes: bytes, Rank: g.rank, Detail: fmt.Sprintf(format, args...)})
}

// check validates dtypes, lengths and counts shared by every op; it
// returns the element count of b.
func (g *group) check(name string, bufs ...backend.Buffer) (int, string) {
	for _, b := range bufs {
		if err := backend.CheckBuffer(b); err != nil {
			return 0, err.Error()
		}
		if b.DType != bufs[0].DType {
			return 0, fmt.Sprintf("dtypes differ: %v and %v", bufs[0].DType, b.DType)
		}
		if b.Len() > math.MaxInt32 {
			return 0, fmt.Sprintf("%d elements: MPI counts are 32-bit (at most %d per call)", b.Len(), math.MaxInt32)
		}
	}
	return bufs[0].Len(), ""
}

// checkRoot and checkOp are backend's checks as the detail strings
// bad takes ("" for none).
func (g *group) checkRoot(root int) string { return detail(backend.CheckRoot(root, g.size)) }

func checkOp(op backend.ReduceOp) string { return detail(backend.CheckReduceOp(op)) }

func detail(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// overlap reports whether two non-empty buffers share memory (MPI forbids
// aliased send and receive buffers outside MPI_IN_PLACE).
func overlap(a, b backend.Buffer) bool {
	if len(a.Bytes) == 0 || len(b.Bytes) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a.Bytes[0])), uintptr(unsafe.Pointer(&b.Bytes[0]))
	return pa < pb+uintptr(len(b.Bytes)) && pb < pa+uintptr(len(a.Bytes))
}

func (g *group) AllReduce(buf backend.Buffer, rop backend.ReduceOp) backend.Work {
	n, msg := g.check("allreduce", buf)
	if msg == "" {
		msg = checkOp(rop)
	}
	if msg != "" {
		return g.bad("allreduce", len(buf.Bytes), "%s", msg)
	}
	p, dt := bufPtr(buf), C.int(buf.DType)
	o := &op{name: "allreduce", bytes: len(buf.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int {
		return C.gdm_iallreduce(g.ops, g.comm, p, C.int(n), dt, C.int(rop), r)
	}
	if rop == backend.Avg && n > 0 {
		o.after = func() { C.gdm_divide(p, C.long(n), dt, C.int(g.size)) }
	}
	return g.submit(o, buf)
}

func (g *group) Broadcast(buf backend.Buffer, root int) backend.Work {
	n, msg := g.check("broadcast", buf)
	if msg == "" {
		msg = g.checkRoot(root)
	}
	if msg != "" {
		return g.bad("broadcast", len(buf.Bytes), "%s", msg)
	}
	p, dt := bufPtr(buf), C.int(buf.DType)
	o := &op{name: "broadcast", bytes: len(buf.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_ibcast(g.comm, p, C.int(n), dt, C.int(root), r) }
	return g.submit(o, buf)
}

func (g *group) Barrier() backend.Work {
	o := &op{name: "barrier"}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_ibarrier(g.comm, r) }
	return g.submit(o)
}

// AllGather: out holds Size() chunks of in.Len() elements, rank-major.
func (g *group) AllGather(out, in backend.Buffer) backend.Work {
	n, msg := g.check("allgather", in, out)
	switch {
	case msg != "":
	case out.Len() != n*g.size:
		msg = fmt.Sprintf("output has %d elements, want %d (%d ranks x %d)", out.Len(), n*g.size, g.size, n)
	case overlap(out, in):
		msg = "input and output overlap"
	}
	if msg != "" {
		return g.bad("allgather", len(in.Bytes), "%s", msg)
	}
	po, pi, dt := bufPtr(out), bufPtr(in), C.int(in.DType)
	o := &op{name: "allgather", bytes: len(in.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_iallgather(g.comm, po, pi, C.int(n), dt, r) }
	return g.submit(o, out, in)
}

// ReduceScatter: in holds Size() chunks of out.Len() elements; this rank
// gets the reduction of its chunk.
func (g *group) ReduceScatter(out, in backend.Buffer, rop backend.ReduceOp) backend.Work {
	n, msg := g.check("reducescatter", out, in)
	switch {
	case msg != "":
	case in.Len() != n*g.size:
		msg = fmt.Sprintf("input has %d elements, want %d (%d ranks x %d)", in.Len(), n*g.size, g.size, n)
	case overlap(out, in):
		msg = "input and output overlap"
	default:
		msg = checkOp(rop)
	}
	if msg != "" {
		return g.bad("reducescatter", len(in.Bytes), "%s", msg)
	}
	po, pi, dt := bufPtr(out), bufPtr(in), C.int(in.DType)
	o := &op{name: "reducescatter", bytes: len(in.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int {
		return C.gdm_ireduce_scatter(g.ops, g.comm, po, pi, C.int(n), dt, C.int(rop), r)
	}
	if rop == backend.Avg && n > 0 {
		o.after = func() { C.gdm_divide(po, C.long(n), dt, C.int(g.size)) }
	}
	return g.submit(o, out, in)
}

// Reduce reduces buf into root's buf; the other ranks' buffers are only read.
func (g *group) Reduce(buf backend.Buffer, root int, rop backend.ReduceOp) backend.Work {
	n, msg := g.check("reduce", buf)
	if msg == "" {
		msg = g.checkRoot(root)
	}
	if msg == "" {
		msg = checkOp(rop)
	}
	if msg != "" {
		return g.bad("reduce", len(buf.Bytes), "%s", msg)
	}
	p, dt := bufPtr(buf), C.int(buf.DType)
	o := &op{name: "reduce", bytes: len(buf.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int {
		return C.gdm_ireduce(g.ops, g.comm, p, C.int(n), dt, C.int(rop), C.int(root), C.int(g.rank), r)
	}
	if rop == backend.Avg && g.rank == root && n > 0 {
		o.after = func() { C.gdm_divide(p, C.long(n), dt, C.int(g.size)) }
	}
	return g.submit(o, buf)
}

// Gather: root's out holds Size() chunks of in.Len(); out is ignored elsewhere.
func (g *group) Gather(out, in backend.Buffer, root int) backend.Work {
	bufs := []backend.Buffer{in}
	if g.rank == root {
		bufs = append(bufs, out)
	}
	n, msg := g.check("gather", bufs...)
	switch {
	case msg != "":
	case g.checkRoot(root) != "":
		msg = g.checkRoot(root)
	case g.rank == root && out.Len() != n*g.size:
		msg = fmt.Sprintf("output has %d elements, want %d (%d ranks x %d)", out.Len(), n*g.size, g.size, n)
	case g.rank == root && overlap(out, in):
		msg = "input and output overlap"
	}
	if msg != "" {
		return g.bad("gather", len(in.Bytes), "%s", msg)
	}
	var po unsafe.Pointer
	if g.rank == root {
		po = bufPtr(out)
	}
	pi, dt := bufPtr(in), C.int(in.DType)
	o := &op{name: "gather", bytes: len(in.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_igather(g.comm, po, pi, C.int(n), dt, C.int(root), r) }
	return g.submit(o, bufs...)
}

// Scatter: root's in holds Size() chunks of out.Len(); in is ignored elsewhere.
func (g *group) Scatter(out, in backend.Buffer, root int) backend.Work {
	bufs := []backend.Buffer{out}
	if g.rank == root {
		bufs = append(bufs, in)
	}
	n, msg := g.check("scatter", bufs...)
	switch {
	case msg != "":
	case g.checkRoot(root) != "":
		msg = g.checkRoot(root)
	case g.rank == root && in.Len() != n*g.size:
		msg = fmt.Sprintf("input has %d elements, want %d (%d ranks x %d)", in.Len(), n*g.size, g.size, n)
	case g.rank == root && overlap(out, in):
		msg = "input and output overlap"
	}
	if msg != "" {
		return g.bad("scatter", len(out.Bytes), "%s", msg)
	}
	var pi unsafe.Pointer
	if g.rank == root {
		pi = bufPtr(in)
	}
	po, dt := bufPtr(out), C.int(out.DType)
	o := &op{name: "scatter", bytes: len(out.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_iscatter(g.comm, po, pi, C.int(n), dt, C.int(root), r) }
	return g.submit(o, bufs...)
}

// AllToAll: in and out hold Size() equal chunks; chunk j of in goes to rank j.
func (g *group) AllToAll(out, in backend.Buffer) backend.Work {
	n, msg := g.check("alltoall", in, out)
	switch {
	case msg != "":
	case out.Len() != n:
		msg = fmt.Sprintf("input has %d elements, output %d", n, out.Len())
	case n%g.size != 0:
		msg = fmt.Sprintf("%d elements do not split into %d equal chunks", n, g.size)
	case overlap(out, in):
		msg = "input and output overlap"
	}
	if msg != "" {
		return g.bad("alltoall", len(in.Bytes), "%s", msg)
	}
	po, pi, dt := bufPtr(out), bufPtr(in), C.int(in.DType)
	chunk := n / g.size
	o := &op{name: "alltoall", bytes: len(in.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_ialltoall(g.comm, po, pi, C.int(chunk), dt, r) }
	return g.submit(o, out, in)
}

func (g *group) checkPeer(peer, tag int) string {
	switch {
	case peer < 0 || peer >= g.size:
		return fmt.Sprintf("peer %d outside world size %d", peer, g.size)
	case tag < 0 || tag > 32767:
		// 32767 is the smallest MPI_TAG_UB the standard allows.
		return fmt.Sprintf("tag %d outside [0, 32767]", tag)
	}
	return ""
}

// Send sends buf to rank dst with tag; it completes once buf may be reused.
func (g *group) Send(buf backend.Buffer, dst, tag int) backend.Work {
	n, msg := g.check("send", buf)
	if msg == "" {
		msg = g.checkPeer(dst, tag)
	}
	if msg != "" {
		return g.bad("send", len(buf.Bytes), "%s", msg)
	}
	p, dt := bufPtr(buf), C.int(buf.DType)
	o := &op{name: "send", bytes: len(buf.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_isend(g.comm, p, C.int(n), dt, C.int(dst), C.int(tag), r) }
	return g.submit(o, buf)
}

// Recv receives into buf from rank src with tag; a longer message is an error.
func (g *group) Recv(buf backend.Buffer, src, tag int) backend.Work {
	n, msg := g.check("recv", buf)
	if msg == "" {
		msg = g.checkPeer(src, tag)
	}
	if msg != "" {
		return g.bad("recv", len(buf.Bytes), "%s", msg)
	}
	p, dt := bufPtr(buf), C.int(buf.DType)
	o := &op{name: "recv", bytes: len(buf.Bytes)}
	o.issue = func(r *C.MPI_Request) C.int { return C.gdm_irecv(g.comm, p, C.int(n), dt, C.int(src), C.int(tag), r) }
	return g.submit(o, buf)
}
