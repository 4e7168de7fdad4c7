package commtest

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/internal/half"
	"sync"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// Group is one rank of a process group whose ranks are goroutines of
// one process. It has the real semantics of a backend: the k-th collective
// issued by each rank is matched with the k-th of every other rank, results
// are written into every rank's buffer, and ops complete asynchronously (one
// after another, in issue order, like a real backend's single stream). It
// exists so that the Reducer and code built on it can be tested without
// sockets; NewGroups creates one.
//
// Mismatched collectives (different kind, dtype, length, op or root at the
// same sequence number) fail on every rank with backend.ErrBadArgument instead
// of silently corrupting data, which makes rank divergence visible in tests.
type Group struct {
	hub  *memHub
	rank int

	mu     sync.Mutex // guards seq, closed and log
	seq    uint64
	closed bool
	log    []OpRecord
}

// OpRecord describes one collective as a rank issued it (for tests).
type OpRecord struct {
	Seq   uint64
	Kind  string // "allreduce", "broadcast", "barrier", "allgather"
	DType backend.DType
	Len   int // elements
	Op    backend.ReduceOp
	Root  int
}

// Option configures NewGroups.
type Option func(*memHub)

// WithLatency delays the completion of every collective by d, simulating a
// network so that tests can observe communication overlapping computation.
func WithLatency(d time.Duration) Option { return func(h *memHub) { h.latency = d } }

// WithTimeout sets the per-operation timeout (default backend.DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(h *memHub) { h.timeout = d } }

// NewGroups returns n connected ranks; element r has Rank() == r.
func NewGroups(n int, opts ...Option) []backend.ProcessGroup {
	if n < 1 {
		panic(fmt.Sprintf("commtest: NewGroups(%d): need at least one rank", n))
	}
	h := &memHub{n: n, ops: map[uint64]*memOp{}, timeout: backend.DefaultTimeout}
	for _, o := range opts {
		o(h)
	}
	h.members = make([]*Group, n)
	out := make([]backend.ProcessGroup, n)
	for r := range out {
		g := &Group{hub: h, rank: r}
		h.members[r] = g
		out[r] = g
	}
	return out
}

type memHub struct {
	n       int
	latency time.Duration
	timeout time.Duration
	members []*Group

	mu   sync.Mutex
	ops  map[uint64]*memOp
	last chan struct{} // completion of the previously started op (serialises execution)
	dead []int         // ranks that closed
}

type memOp struct {
	seq     uint64
	rec     OpRecord
	bufs    []backend.Buffer // per rank (input for allgather)
	outs    []backend.Buffer // allgather outputs
	works   []*memWork       // per rank
	afters  []func()         // per rank, run on success before the Work completes
	arrived int
	err     error
}

// memWork is backend's Future with the group's timeout counted from the
// op's issue, which the in-memory group has no thread of its own to enforce.
type memWork struct {
	*backend.Future
	issued   time.Time
	timeout  time.Duration
	describe func() string
}

func (w *memWork) finish(err error) { w.Complete(err) }

// Wait blocks until the op completes, ctx ends or the group timeout passes.
func (w *memWork) Wait(ctx context.Context) error {
	if w.IsCompleted() {
		return w.Err()
	}
	remain := w.timeout - time.Since(w.issued)
	if remain <= 0 {
		remain = time.Nanosecond
	}
	t := time.NewTimer(remain)
	defer t.Stop()
	select {
	case <-w.Done():
		return w.Err()
	case <-ctx.Done():
		return fmt.Errorf("commtest: in-memory %s: %w", w.describe(), ctx.Err())
	case <-t.C:
		if w.IsCompleted() {
			return w.Err()
		}
		return fmt.Errorf("%w: in-memory %s after %v", backend.ErrTimeout, w.describe(), w.timeout)
	}
}

func (g *Group) Rank() int       { return g.rank }
func (g *Group) Size() int       { return g.hub.n }
func (g *Group) Backend() string { return "memory" }

// Ops returns the collectives this rank issued, in order.
func (g *Group) Ops() []OpRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]OpRecord(nil), g.log...)
}

func (g *Group) AllReduce(buf backend.Buffer, op backend.ReduceOp) backend.Work {
	return g.issue(OpRecord{Kind: "allreduce", DType: buf.DType, Len: buf.Len(), Op: op}, buf, backend.Buffer{})
}

// AllReduceV implements backend.VectorAllReducer: the pieces are reduced
// as one concatenated all-reduce (recorded as "allreduce"), so it matches
// AllReduce on the same total on other ranks.
func (g *Group) AllReduceV(bufs []backend.Buffer, op backend.ReduceOp) backend.Work {
	if len(bufs) == 0 {
		return backend.DoneWork{}
	}
	dt := bufs[0].DType
	var all []byte
	for i, b := range bufs {
		if b.DType != dt {
			return backend.DoneWork{Err: fmt.Errorf("%w: AllReduceV buffer %d is %v, buffer 0 is %v", backend.ErrBadArgument, i, b.DType, dt)}
		}
		all = append(all, b.Bytes...)
	}
	whole := backend.Buffer{DType: dt, Bytes: all}
	scatter := func() {
		at := 0
		for _, b := range bufs {
			at += copy(b.Bytes, all[at:])
		}
	}
	return g.issue(OpRecord{Kind: "allreduce", DType: dt, Len: whole.Len(), Op: op}, whole, backend.Buffer{}, scatter)
}

func (g *Group) Broadcast(buf backend.Buffer, root int) backend.Work {
	if root < 0 || root >= g.hub.n {
		return backend.DoneWork{Err: fmt.Errorf("%w: broadcast root %d outside [0,%d)", backend.ErrBadArgument, root, g.hub.n)}
	}
	return g.issue(OpRecord{Kind: "broadcast", DType: buf.DType, Len: buf.Len(), Root: root}, buf, backend.Buffer{})
}

func (g *Group) Barrier() backend.Work {
	return g.issue(OpRecord{Kind: "barrier"}, backend.Buffer{}, backend.Buffer{})
}

// AllGather implements backend.AllGatherer.
func (g *Group) AllGather(out, in backend.Buffer) backend.Work {
	if out.DType != in.DType || out.Len() != in.Len()*g.hub.n {
		return backend.DoneWork{Err: fmt.Errorf("%w: allgather out has %d %v elements, want %d %v", backend.ErrBadArgument, out.Len(), out.DType, in.Len()*g.hub.n, in.DType)}
	}
	return g.issue(OpRecord{Kind: "allgather", DType: in.DType, Len: in.Len()}, in, out)
}

// Close fails this rank's pending ops with backend.ErrClosed and the other
// ranks' ops that wait for it with backend.ErrPeerFailed.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	h := g.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = append(h.dead, g.rank)
	for seq, op := range h.ops {
		for r, w := range op.works {
			if w == nil {
				continue
			}
			if r == g.rank {
				w.finish(fmt.Errorf("%w: %s #%d", backend.ErrClosed, op.rec.Kind, seq))
			} else {
				w.finish(fmt.Errorf("%w: ranks [%d] closed before joining %s #%d", backend.ErrPeerFailed, g.rank, op.rec.Kind, seq))
			}
		}
		delete(h.ops, seq)
	}
	return nil
}

// issue joins this rank's part of a collective; after, if given, runs when
// it succeeded, before the Work completes.
func (g *Group) issue(rec OpRecord, buf, out backend.Buffer, after ...func()) backend.Work {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return backend.DoneWork{Err: fmt.Errorf("%w: %s on closed rank %d", backend.ErrClosed, rec.Kind, g.rank)}
	}
	rec.Seq = g.seq
	g.seq++
	g.log = append(g.log, rec)
	g.mu.Unlock()

	h := g.hub
	w := &memWork{Future: backend.NewFuture(), issued: time.Now(), timeout: h.timeout}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dead) > 0 {
		w.describe = func() string { return rec.Kind }
		w.finish(fmt.Errorf("%w: ranks %v closed; %s #%d cannot complete", backend.ErrPeerFailed, h.dead, rec.Kind, rec.Seq))
		return w
	}
	op := h.ops[rec.Seq]
	if op == nil {
		op = &memOp{seq: rec.Seq, rec: rec, bufs: make([]backend.Buffer, h.n), outs: make([]backend.Buffer, h.n),
			works: make([]*memWork, h.n), afters: make([]func(), h.n)}
		h.ops[rec.Seq] = op
	} else if op.err == nil {
		first := op.rec
		first.Seq = rec.Seq
		if first != rec {
			op.err = fmt.Errorf("%w: collective #%d mismatch: rank %d issued %s(%v x%d, op %v, root %d) but another rank issued %s(%v x%d, op %v, root %d)",
				backend.ErrBadArgument, rec.Seq, g.rank, rec.Kind, rec.DType, rec.Len, rec.Op, rec.Root,
				first.Kind, first.DType, first.Len, first.Op, first.Root)
		}
	}
	w.describe = func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var missing []int
		for r, ww := range op.works {
			if ww == nil {
				missing = append(missing, r)
			}
		}
		return fmt.Sprintf("%s #%d (%d bytes) waiting for ranks %v", rec.Kind, rec.Seq, len(buf.Bytes), missing)
	}
	op.bufs[g.rank] = buf
	op.outs[g.rank] = out
	op.works[g.rank] = w
	if len(after) > 0 {
		op.afters[g.rank] = after[0]
	}
	op.arrived++
	if op.arrived == h.n {
		delete(h.ops, rec.Seq)
		prev := h.last
		done := make(chan struct{})
		h.last = done
		go h.execute(op, prev, done)
	}
	return w
}

// execute runs one matched collective after the previous one finished.
func (h *memHub) execute(op *memOp, prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		<-prev
	}
	if h.latency > 0 {
		time.Sleep(h.latency)
	}
	err := op.err
	if err == nil {
		err = runCollective(op)
	}
	for r, w := range op.works {
		if err == nil && op.afters[r] != nil {
			op.afters[r]()
		}
		w.finish(err)
	}
}

func runCollective(op *memOp) error {
	switch op.rec.Kind {
	case "barrier":
		return nil
	case "broadcast":
		src := op.bufs[op.rec.Root].Bytes
		for r, b := range op.bufs {
			if r != op.rec.Root {
				copy(b.Bytes, src)
			}
		}
		return nil
	case "allgather":
		n := len(op.bufs[0].Bytes)
		for _, out := range op.outs {
			for r, in := range op.bufs {
				copy(out.Bytes[r*n:(r+1)*n], in.Bytes)
			}
		}
		return nil
	case "allreduce":
		if len(op.bufs) == 1 {
			return nil // every op, Avg included, is the identity on one rank
		}
		return memAllReduce(op.bufs, op.rec.Op)
	}
	return fmt.Errorf("%w: unknown collective %q", backend.ErrBadArgument, op.rec.Kind)
}

// memAllReduce reduces in rank order into a float64 accumulator (exact for
// the small worlds used in tests) and writes the same result to every rank.
func memAllReduce(bufs []backend.Buffer, op backend.ReduceOp) error {
	n := bufs[0].Len()
	dt := bufs[0].DType
	acc := make([]float64, n)
	for r, b := range bufs {
		vals := Values(b)
		if vals == nil {
			return fmt.Errorf("%w: allreduce on dtype %v", backend.ErrUnsupported, dt)
		}
		if r == 0 {
			copy(acc, vals)
			continue
		}
		for i, v := range vals {
			switch op {
			case backend.Sum, backend.Avg:
				acc[i] += v
			case backend.Product:
				acc[i] *= v
			case backend.Max:
				acc[i] = max(acc[i], v)
			case backend.Min:
				acc[i] = min(acc[i], v)
			default:
				return fmt.Errorf("%w: reduce op %v", backend.ErrUnsupported, op)
			}
		}
	}
	if op == backend.Avg {
		for i := range acc {
			acc[i] /= float64(len(bufs))
		}
	}
	for _, b := range bufs {
		setValues(b, acc)
	}
	return nil
}

// setValues writes vals into b, converted to its dtype.
func setValues(b backend.Buffer, vals []float64) {
	switch b.DType {
	case backend.Float32:
		d := view[float32](b)
		for i, v := range vals {
			d[i] = float32(v)
		}
	case backend.Float64:
		copy(view[float64](b), vals)
	case backend.Int32:
		d := view[int32](b)
		for i, v := range vals {
			d[i] = int32(v)
		}
	case backend.Int64:
		d := view[int64](b)
		for i, v := range vals {
			d[i] = int64(v)
		}
	case backend.Float16:
		d := view[uint16](b)
		for i, v := range vals {
			d[i] = half.F32ToF16(float32(v))
		}
	case backend.BFloat16:
		d := view[uint16](b)
		for i, v := range vals {
			d[i] = half.F32ToBF16(float32(v))
		}
	}
}
