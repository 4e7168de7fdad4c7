package tcp

import (
	"encoding/binary"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
)

// The tcp backend's public ops: validate, describe, queue. The algorithms
// are in algos.go.

// collective codes, carried by the descriptor (opDesc) every rank checks.
const (
	collAllReduce uint8 = iota + 1
	collBroadcast
	collAllGather
	collReduceScatter
	collReduce
	collGather
	collScatter
	collAllToAll
	collBarrier
	collMonitoredBarrier
)

var collNames = [...]string{"", "allreduce", "broadcast", "allgather", "reducescatter", "reduce", "gather",
	"scatter", "alltoall", "barrier", "monitored_barrier"}

// opDesc is what every rank must agree on for a collective. It travels in
// the first data frame of each collective to each peer (see frame.go), in
// progress answers, and in debug mode's agreement check.
type opDesc struct {
	coll  uint8
	dtype backend.DType
	redop backend.ReduceOp
	count uint64 // elements of the op's main buffer
	root  int32
}

// descLen is the encoded size of an opDesc.
const descLen = 16

func (d opDesc) encode() []byte {
	b := make([]byte, descLen)
	d.put(b)
	return b
}

// put encodes d into b[:descLen].
func (d opDesc) put(b []byte) {
	_ = b[descLen-1]
	b[0], b[1], b[2], b[3] = d.coll, byte(d.dtype), byte(d.redop), 0
	binary.BigEndian.PutUint32(b[4:], uint32(d.root))
	binary.BigEndian.PutUint64(b[8:], d.count)
}

func decodeOpDesc(b []byte) opDesc {
	return opDesc{coll: b[0], dtype: backend.DType(b[1]), redop: backend.ReduceOp(b[2]),
		root: int32(binary.BigEndian.Uint32(b[4:])), count: binary.BigEndian.Uint64(b[8:])}
}

// String names the op as users wrote it: "allreduce(sum, float32, 4096 B)".
func (d opDesc) String() string {
	name := fmt.Sprintf("op%d", d.coll)
	if int(d.coll) < len(collNames) {
		name = collNames[d.coll]
	}
	size := fmt.Sprintf("%v, %d B", d.dtype, d.count*uint64(d.dtype.Size()))
	if d.dtype > backend.BFloat16 {
		size = fmt.Sprintf("%v x %d", d.dtype, d.count) // a size we cannot trust
	}
	switch d.coll {
	case collBarrier, collMonitoredBarrier:
		return name
	case collAllReduce, collReduceScatter:
		return fmt.Sprintf("%s(%v, %s)", name, d.redop, size)
	case collReduce:
		return fmt.Sprintf("%s(%v, root %d, %s)", name, d.redop, d.root, size)
	case collBroadcast, collGather, collScatter:
		return fmt.Sprintf("%s(root %d, %s)", name, d.root, size)
	}
	return fmt.Sprintf("%s(%s)", name, size)
}

// mismatchFault is the failure of collective #seq when this rank issued
// mine and rank peer issued theirs. It names both, lower rank first, so
// that every rank's message reads the same.
func (g *tcpGroup) mismatchFault(seq uint64, mine opDesc, peer int, theirs opDesc) *peerFault {
	a, da, b, db := g.rank, mine, peer, theirs
	if b < a {
		a, da, b, db = b, db, a, da
	}
	return &peerFault{kind: backend.ErrBadArgument, peers: []int{peer},
		detail: fmt.Sprintf("collective #%d mismatch: rank %d issued %v, rank %d issued %v", seq, a, da, b, db)}
}

// badArg is the Work of an op rejected before it was issued.
func (g *tcpGroup) badArg(op string, format string, args ...any) backend.Work {
	return backend.FailedFuture(&backend.OpError{Kind: backend.ErrBadArgument, Op: op, Rank: g.rank, Detail: fmt.Sprintf(format, args...)})
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// AllReduce reduces buf across all ranks in place.
func (g *tcpGroup) AllReduce(buf backend.Buffer, op backend.ReduceOp) backend.Work {
	if err := firstErr(backend.CheckBuffer(buf), backend.CheckReduceOp(op)); err != nil {
		return g.badArg("allreduce", "%v", err)
	}
	return g.submit(&tcpOp{name: "allreduce", bytes: len(buf.Bytes),
		desc: opDesc{coll: collAllReduce, dtype: buf.DType, redop: op, count: uint64(buf.Len())},
		run:  func(o *tcpOp) error { return g.allReduce(o, buf, op) }})
}

// Broadcast copies root's buf to every rank.
func (g *tcpGroup) Broadcast(buf backend.Buffer, root int) backend.Work {
	if err := firstErr(backend.CheckBuffer(buf), backend.CheckRoot(root, g.size)); err != nil {
		return g.badArg("broadcast", "%v", err)
	}
	return g.submit(&tcpOp{name: "broadcast", bytes: len(buf.Bytes),
		desc: opDesc{coll: collBroadcast, dtype: buf.DType, count: uint64(buf.Len()), root: int32(root)},
		run:  func(o *tcpOp) error { return g.broadcast(o, buf, root) }})
}

// Barrier completes once every rank has entered it.
func (g *tcpGroup) Barrier() backend.Work {
	return g.submit(&tcpOp{name: "barrier", desc: opDesc{coll: collBarrier}, run: g.barrier})
}

// AllGather: out holds Size() chunks of in.Len() elements, rank-major.
func (g *tcpGroup) AllGather(out, in backend.Buffer) backend.Work {
	if err := g.checkChunked("allgather", out, in); err != nil {
		return g.badArg("allgather", "%v", err)
	}
	return g.submit(&tcpOp{name: "allgather", bytes: len(out.Bytes),
		desc: opDesc{coll: collAllGather, dtype: in.DType, count: uint64(in.Len())},
		run:  func(o *tcpOp) error { return g.allGather(o, out, in) }})
}

// ReduceScatter: rank r gets the reduction of chunk r of in.
func (g *tcpGroup) ReduceScatter(out, in backend.Buffer, op backend.ReduceOp) backend.Work {
	if err := firstErr(g.checkChunked("reducescatter", in, out), backend.CheckReduceOp(op)); err != nil {
		return g.badArg("reducescatter", "%v", err)
	}
	return g.submit(&tcpOp{name: "reducescatter", bytes: len(in.Bytes),
		desc: opDesc{coll: collReduceScatter, dtype: in.DType, redop: op, count: uint64(out.Len())},
		run:  func(o *tcpOp) error { return g.reduceScatter(o, out, in, op) }})
}

// Reduce reduces buf into root's buf; the other ranks' buf is left as it was.
func (g *tcpGroup) Reduce(buf backend.Buffer, root int, op backend.ReduceOp) backend.Work {
	if err := firstErr(backend.CheckBuffer(buf), backend.CheckReduceOp(op), backend.CheckRoot(root, g.size)); err != nil {
		return g.badArg("reduce", "%v", err)
	}
	return g.submit(&tcpOp{name: "reduce", bytes: len(buf.Bytes),
		desc: opDesc{coll: collReduce, dtype: buf.DType, redop: op, count: uint64(buf.Len()), root: int32(root)},
		run:  func(o *tcpOp) error { return g.reduce(o, buf, root, op) }})
}

// Gather: root's out holds Size() chunks of in.Len(); out is ignored elsewhere.
func (g *tcpGroup) Gather(out, in backend.Buffer, root int) backend.Work {
	err := firstErr(backend.CheckBuffer(in), backend.CheckRoot(root, g.size))
	if err == nil && g.rank == root {
		err = g.checkChunked("gather", out, in)
	}
	if err != nil {
		return g.badArg("gather", "%v", err)
	}
	return g.submit(&tcpOp{name: "gather", bytes: len(in.Bytes),
		desc: opDesc{coll: collGather, dtype: in.DType, count: uint64(in.Len()), root: int32(root)},
		run:  func(o *tcpOp) error { return g.gather(o, out, in, root) }})
}

// Scatter: root's in holds Size() chunks of out.Len(); in is ignored elsewhere.
func (g *tcpGroup) Scatter(out, in backend.Buffer, root int) backend.Work {
	err := firstErr(backend.CheckBuffer(out), backend.CheckRoot(root, g.size))
	if err == nil && g.rank == root {
		err = g.checkChunked("scatter", in, out)
	}
	if err != nil {
		return g.badArg("scatter", "%v", err)
	}
	return g.submit(&tcpOp{name: "scatter", bytes: len(out.Bytes),
		desc: opDesc{coll: collScatter, dtype: out.DType, count: uint64(out.Len()), root: int32(root)},
		run:  func(o *tcpOp) error { return g.scatter(o, out, in, root) }})
}

// AllToAll: chunk j of in goes to rank j, chunk j of out comes from rank j.
func (g *tcpGroup) AllToAll(out, in backend.Buffer) backend.Work {
	err := firstErr(backend.CheckBuffer(in), backend.CheckBuffer(out))
	if err == nil && (in.DType != out.DType || len(in.Bytes) != len(out.Bytes) || in.Len()%g.size != 0) {
		err = fmt.Errorf("in (%v x %d) and out (%v x %d) must match and split into %d chunks",
			in.DType, in.Len(), out.DType, out.Len(), g.size)
	}
	if err != nil {
		return g.badArg("alltoall", "%v", err)
	}
	return g.submit(&tcpOp{name: "alltoall", bytes: len(in.Bytes),
		desc: opDesc{coll: collAllToAll, dtype: in.DType, count: uint64(in.Len())},
		run:  func(o *tcpOp) error { return g.allToAll(o, out, in) }})
}

// checkChunked checks that big holds Size() chunks of small.
func (g *tcpGroup) checkChunked(op string, big, small backend.Buffer) error {
	if err := firstErr(backend.CheckBuffer(big), backend.CheckBuffer(small)); err != nil {
		return err
	}
	if big.DType != small.DType || len(big.Bytes) != g.size*len(small.Bytes) {
		return fmt.Errorf("%s needs %d chunks of %v x %d, got %v x %d", op, g.size,
			small.DType, small.Len(), big.DType, big.Len())
	}
	return nil
}
