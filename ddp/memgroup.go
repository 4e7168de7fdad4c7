package ddp

import (
	"context"
	"fmt"
	"goddp/internal/half"
	"sync"
	"time"

	"goddp/comm"
)

// InMemoryGroup is one rank of a process group whose ranks are goroutines of
// one process. It has the real semantics of a backend: the k-th collective
// issued by each rank is matched with the k-th of every other rank, results
// are written into every rank's buffer, and ops complete asynchronously (one
// after another, in issue order, like a real backend's single stream). It
// exists so that the Reducer and code built on it can be tested without
// sockets; NewInMemoryGroups creates one.
//
// Mismatched collectives (different kind, dtype, length, op or root at the
// same sequence number) fail on every rank with comm.ErrBadArgument instead
// of silently corrupting data, which makes rank divergence visible in tests.
type InMemoryGroup struct {
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
	DType comm.DType
	Len   int // elements
	Op    comm.ReduceOp
	Root  int
}

// InMemoryOption configures NewInMemoryGroups.
type InMemoryOption func(*memHub)

// WithLatency delays the completion of every collective by d, simulating a
// network so that tests can observe communication overlapping computation.
func WithLatency(d time.Duration) InMemoryOption { return func(h *memHub) { h.latency = d } }

// WithGroupTimeout sets the per-operation timeout (default comm.DefaultTimeout).
func WithGroupTimeout(d time.Duration) InMemoryOption { return func(h *memHub) { h.timeout = d } }

// NewInMemoryGroups returns n connected ranks; element r has Rank() == r.
func NewInMemoryGroups(n int, opts ...InMemoryOption) []comm.ProcessGroup {
	if n < 1 {
		panic(fmt.Sprintf("ddp: NewInMemoryGroups(%d): need at least one rank", n))
	}
	h := &memHub{n: n, ops: map[uint64]*memOp{}, timeout: comm.DefaultTimeout}
	for _, o := range opts {
		o(h)
	}
	h.members = make([]*InMemoryGroup, n)
	out := make([]comm.ProcessGroup, n)
	for r := range out {
		g := &InMemoryGroup{hub: h, rank: r}
		h.members[r] = g
		out[r] = g
	}
	return out
}

type memHub struct {
	n       int
	latency time.Duration
	timeout time.Duration
	members []*InMemoryGroup

	mu   sync.Mutex
	ops  map[uint64]*memOp
	last chan struct{} // completion of the previously started op (serialises execution)
	dead []int         // ranks that closed
}

type memOp struct {
	seq     uint64
	rec     OpRecord
	bufs    []comm.Buffer // per rank (input for allgather)
	outs    []comm.Buffer // allgather outputs
	works   []*memWork    // per rank
	arrived int
	err     error
}

type memWork struct {
	done     chan struct{}
	err      error
	issued   time.Time
	timeout  time.Duration
	describe func() string
}

func (w *memWork) finish(err error) {
	w.err = err
	close(w.done)
}

// Wait blocks until the op completes, ctx ends or the group timeout passes.
func (w *memWork) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	remain := w.timeout - time.Since(w.issued)
	if remain <= 0 {
		remain = time.Nanosecond
	}
	t := time.NewTimer(remain)
	defer t.Stop()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("ddp: in-memory %s: %w", w.describe(), ctx.Err())
	case <-t.C:
		select {
		case <-w.done:
			return w.err
		default:
		}
		return fmt.Errorf("%w: in-memory %s after %v", comm.ErrTimeout, w.describe(), w.timeout)
	}
}

// IsCompleted reports whether the op finished.
func (w *memWork) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (g *InMemoryGroup) Rank() int       { return g.rank }
func (g *InMemoryGroup) Size() int       { return g.hub.n }
func (g *InMemoryGroup) Backend() string { return "memory" }

// Ops returns the collectives this rank issued, in order.
func (g *InMemoryGroup) Ops() []OpRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]OpRecord(nil), g.log...)
}

func (g *InMemoryGroup) AllReduce(buf comm.Buffer, op comm.ReduceOp) comm.Work {
	return g.issue(OpRecord{Kind: "allreduce", DType: buf.DType, Len: buf.Len(), Op: op}, buf, comm.Buffer{})
}

func (g *InMemoryGroup) Broadcast(buf comm.Buffer, root int) comm.Work {
	if root < 0 || root >= g.hub.n {
		return comm.DoneWork{Err: fmt.Errorf("%w: broadcast root %d outside [0,%d)", comm.ErrBadArgument, root, g.hub.n)}
	}
	return g.issue(OpRecord{Kind: "broadcast", DType: buf.DType, Len: buf.Len(), Root: root}, buf, comm.Buffer{})
}

func (g *InMemoryGroup) Barrier() comm.Work {
	return g.issue(OpRecord{Kind: "barrier"}, comm.Buffer{}, comm.Buffer{})
}

// AllGather implements comm.AllGatherer.
func (g *InMemoryGroup) AllGather(out, in comm.Buffer) comm.Work {
	if out.DType != in.DType || out.Len() != in.Len()*g.hub.n {
		return comm.DoneWork{Err: fmt.Errorf("%w: allgather out has %d %v elements, want %d %v", comm.ErrBadArgument, out.Len(), out.DType, in.Len()*g.hub.n, in.DType)}
	}
	return g.issue(OpRecord{Kind: "allgather", DType: in.DType, Len: in.Len()}, in, out)
}

// Close fails this rank's pending ops with comm.ErrClosed and the other
// ranks' ops that wait for it with comm.ErrPeerFailed.
func (g *InMemoryGroup) Close() error {
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
				w.finish(fmt.Errorf("%w: %s #%d", comm.ErrClosed, op.rec.Kind, seq))
			} else {
				w.finish(fmt.Errorf("%w: ranks [%d] closed before joining %s #%d", comm.ErrPeerFailed, g.rank, op.rec.Kind, seq))
			}
		}
		delete(h.ops, seq)
	}
	return nil
}

func (g *InMemoryGroup) issue(rec OpRecord, buf, out comm.Buffer) comm.Work {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return comm.DoneWork{Err: fmt.Errorf("%w: %s on closed rank %d", comm.ErrClosed, rec.Kind, g.rank)}
	}
	rec.Seq = g.seq
	g.seq++
	g.log = append(g.log, rec)
	g.mu.Unlock()

	h := g.hub
	w := &memWork{done: make(chan struct{}), issued: time.Now(), timeout: h.timeout}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dead) > 0 {
		w.describe = func() string { return rec.Kind }
		w.finish(fmt.Errorf("%w: ranks %v closed; %s #%d cannot complete", comm.ErrPeerFailed, h.dead, rec.Kind, rec.Seq))
		return w
	}
	op := h.ops[rec.Seq]
	if op == nil {
		op = &memOp{seq: rec.Seq, rec: rec, bufs: make([]comm.Buffer, h.n), outs: make([]comm.Buffer, h.n), works: make([]*memWork, h.n)}
		h.ops[rec.Seq] = op
	} else if op.err == nil {
		first := op.rec
		first.Seq = rec.Seq
		if first != rec {
			op.err = fmt.Errorf("%w: collective #%d mismatch: rank %d issued %s(%v x%d, op %v, root %d) but another rank issued %s(%v x%d, op %v, root %d)",
				comm.ErrBadArgument, rec.Seq, g.rank, rec.Kind, rec.DType, rec.Len, rec.Op, rec.Root,
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
	for _, w := range op.works {
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
	return fmt.Errorf("%w: unknown collective %q", comm.ErrBadArgument, op.rec.Kind)
}

// memAllReduce reduces in rank order into a float64 accumulator (exact for
// the small worlds used in tests) and writes the same result to every rank.
func memAllReduce(bufs []comm.Buffer, op comm.ReduceOp) error {
	n := bufs[0].Len()
	dt := bufs[0].DType
	acc := make([]float64, n)
	for r, b := range bufs {
		vals := bufferToF64(b)
		if vals == nil {
			return fmt.Errorf("%w: allreduce on dtype %v", comm.ErrUnsupported, dt)
		}
		if r == 0 {
			copy(acc, vals)
			continue
		}
		for i, v := range vals {
			switch op {
			case comm.Sum, comm.Avg:
				acc[i] += v
			case comm.Product:
				acc[i] *= v
			case comm.Max:
				acc[i] = max(acc[i], v)
			case comm.Min:
				acc[i] = min(acc[i], v)
			default:
				return fmt.Errorf("%w: reduce op %v", comm.ErrUnsupported, op)
			}
		}
	}
	if op == comm.Avg {
		for i := range acc {
			acc[i] /= float64(len(bufs))
		}
	}
	for _, b := range bufs {
		f64ToBuffer(b, acc)
	}
	return nil
}

func bufferToF64(b comm.Buffer) []float64 {
	out := make([]float64, b.Len())
	switch b.DType {
	case comm.Float32:
		for i, v := range bufF32(b) {
			out[i] = float64(v)
		}
	case comm.Float64:
		copy(out, bufF64(b))
	case comm.Int32:
		for i, v := range bufI32(b) {
			out[i] = float64(v)
		}
	case comm.Int64:
		for i, v := range bufI64(b) {
			out[i] = float64(v)
		}
	case comm.Float16:
		for i, v := range bufU16(b) {
			out[i] = float64(half.F16ToF32(v))
		}
	case comm.BFloat16:
		for i, v := range bufU16(b) {
			out[i] = float64(half.BF16ToF32(v))
		}
	default:
		return nil
	}
	return out
}

func f64ToBuffer(b comm.Buffer, vals []float64) {
	switch b.DType {
	case comm.Float32:
		d := bufF32(b)
		for i, v := range vals {
			d[i] = float32(v)
		}
	case comm.Float64:
		copy(bufF64(b), vals)
	case comm.Int32:
		d := bufI32(b)
		for i, v := range vals {
			d[i] = int32(v)
		}
	case comm.Int64:
		d := bufI64(b)
		for i, v := range vals {
			d[i] = int64(v)
		}
	case comm.Float16:
		d := bufU16(b)
		for i, v := range vals {
			d[i] = half.F32ToF16(float32(v))
		}
	case comm.BFloat16:
		d := bufU16(b)
		for i, v := range vals {
			d[i] = half.F32ToBF16(float32(v))
		}
	}
}
