package shm

import (
	"github.com/goddp/goddp/comm/backend"
	"sort"
	"unsafe"
)

// shmVec is a byte sequence stored in pieces: the buffers of one
// AllReduceV, or a single buffer. The chunked all-reduce reads and writes
// it through gather, scatter and pieces, so reducing a list of gradients
// where they lie costs what reducing one buffer does; the wire protocol is
// the same, so a rank calling AllReduceV matches peers calling AllReduce
// on the same total.
type shmVec struct {
	parts [][]byte
	ends  []int // ends[i]: offset just past parts[i]
}

func newShmVec(bufs []backend.Buffer) *shmVec {
	v := &shmVec{parts: make([][]byte, 0, len(bufs)), ends: make([]int, 0, len(bufs))}
	n := 0
	for _, b := range bufs {
		if len(b.Bytes) == 0 {
			continue
		}
		n += len(b.Bytes)
		v.parts = append(v.parts, b.Bytes)
		v.ends = append(v.ends, n)
	}
	return v
}

func (v *shmVec) len() int {
	if len(v.ends) == 0 {
		return 0
	}
	return v.ends[len(v.ends)-1]
}

// shmPieces walks the pieces of [off, off+n) of a shmVec: after each next
// that returns true, p is the piece and at its offset from off.
type shmPieces struct {
	v       *shmVec
	i, left int
	pos     int // absolute offset of p
	start   int // off
	p       []byte
	at      int
}

func (v *shmVec) pieces(off, n int) shmPieces {
	i := sort.SearchInts(v.ends, off+1) // first part ending after off
	return shmPieces{v: v, i: i, left: n, pos: off, start: off}
}

func (it *shmPieces) next() bool {
	if it.left <= 0 || it.i >= len(it.v.parts) {
		return false
	}
	part := it.v.parts[it.i]
	begin := it.v.ends[it.i] - len(part)
	lo := it.pos - begin
	hi := min(len(part), lo+it.left)
	it.p = part[lo:hi:hi]
	it.at = it.pos - it.start
	it.pos += hi - lo
	it.left -= hi - lo
	it.i++
	return true
}

// gather copies [off, off+len(dst)) into dst.
func (v *shmVec) gather(dst []byte, off int) {
	for it := v.pieces(off, len(dst)); it.next(); {
		copy(dst[it.at:], it.p)
	}
}

// scatter copies src into [off, off+len(src)).
func (v *shmVec) scatter(off int, src []byte) {
	for it := v.pieces(off, len(src)); it.next(); {
		copy(it.p, src[it.at:])
	}
}

// AllReduceV implements backend.VectorAllReducer: bufs are reduced in
// place as if concatenated, with the chunked algorithm reading and writing
// them where they lie.
func (g *shmGroup) AllReduceV(bufs []backend.Buffer, op backend.ReduceOp) backend.Work {
	if len(bufs) == 0 {
		return backend.DoneWork{}
	}
	dt := bufs[0].DType
	for i, b := range bufs {
		if err := backend.CheckBuffer(b); err != nil {
			return g.badArg(shmAllReduce, "AllReduceV buffer %d: %v", i, err)
		}
		if b.DType != dt {
			return g.badArg(shmAllReduce, "AllReduceV buffer %d is %v, buffer 0 is %v", i, b.DType, dt)
		}
	}
	if err := backend.CheckReduceOp(op); err != nil {
		return g.badArg(shmAllReduce, "%v", err)
	}
	if i, j, ok := overlapping(bufs); ok {
		return g.badArg(shmAllReduce, "AllReduceV buffers %d and %d overlap", i, j)
	}
	return g.submit(&shmOp{kind: shmAllReduce, buf: backend.Buffer{DType: dt}, vec: newShmVec(bufs), rop: op})
}

// overlapping reports two buffers that share memory.
func overlapping(bufs []backend.Buffer) (int, int, bool) {
	type span struct {
		lo, hi uintptr
		i      int
	}
	spans := make([]span, 0, len(bufs))
	for i, b := range bufs {
		if len(b.Bytes) > 0 {
			lo := uintptr(unsafe.Pointer(&b.Bytes[0]))
			spans = append(spans, span{lo, lo + uintptr(len(b.Bytes)), i})
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].lo < spans[b].lo })
	for k := 1; k < len(spans); k++ {
		if spans[k].lo < spans[k-1].hi {
			return min(spans[k-1].i, spans[k].i), max(spans[k-1].i, spans[k].i), true
		}
	}
	return 0, 0, false
}

// allReduceVec runs an AllReduceV. Above the small size it is the chunked
// algorithm over the pieces; the small and single-copy algorithms need one
// buffer, so the pieces are gathered into one and scattered back (the
// small one copies through the slots anyway).
func (g *shmGroup) allReduceVec(op *shmOp) error {
	v := op.vec
	n := v.len()
	if n == 0 || g.size == 1 {
		return nil
	}
	if n > g.smallMax && !(g.cma && n >= g.cmaMin) {
		return g.allReduceLarge(op, v)
	}
	if cap(g.vecTmp) < n {
		g.vecTmp = make([]byte, n)
	}
	tmp := backend.Buffer{DType: op.buf.DType, Bytes: g.vecTmp[:n]}
	v.gather(tmp.Bytes, 0)
	var err error
	if n <= g.smallMax {
		err = g.allReduceSmall(op, tmp)
	} else {
		err = g.allReduceDirect(op, tmp)
	}
	if err == nil {
		v.scatter(0, tmp.Bytes)
	}
	return err
}

// single is buf as a one-piece shmVec, in storage the group reuses (only
// the executor calls it).
func (g *shmGroup) single(buf []byte) *shmVec {
	g.oneParts[0], g.oneEnds[0] = buf, len(buf)
	g.one = shmVec{parts: g.oneParts[:], ends: g.oneEnds[:]}
	return &g.one
}
