package shm

import (
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/reduce"
)

// Protocol. Every collective is a series of steps, numbered by a counter
// that all ranks advance identically (g.step). In step s a rank owns slot
// s mod nbuf of its own slot ring and signals progress by storing s into
// three counters in its control block:
//
//	posted[r]   = s  its data for step s is in its slot
//	reduced[r]  = s  its share of the reduction of step s is in its slot
//	consumed[r] = s  it has finished reading the other ranks' slots of step s
//
// A rank may write slot s mod nbuf again only when every peer has consumed
// step s-nbuf, so nbuf steps can be in flight; the counters only grow, and
// every wait is "counter >= s", so a rank that skips a counter it does not
// need in some step never blocks anyone.
//
// Algorithms:
//   - all-reduce, small (<= smallMax bytes): one step; every rank posts its
//     whole buffer and reduces all of them itself. One synchronisation, no
//     second round trip: latency-optimal.
//   - all-reduce, large: pipelined in chunks; per chunk, reduce-scatter then
//     all-gather through the slots: rank r reduces the r-th 1/N slice of
//     the chunk (reading its own data straight from the user buffer), posts
//     the result, and copies the other slices' results out. Each rank moves
//     about 2x the buffer instead of N x, and the chunk stays in cache.
//   - all-reduce, from cmaMin bytes when every rank may read the others'
//     memory: one step, single-copy through process_vm_readv (cma.go).
//   - reduce: like the chunked all-reduce, with results gathered only at
//     the root.
//   - the others (broadcast, all-gather, reduce-scatter, gather, scatter,
//     all-to-all) are copy-in/copy-out through the slots, in chunks that
//     fill a slot.
//
// Reductions always combine the ranks' contributions in rank order
// ((x0 op x1) op x2 ...), so every rank gets bit-identical floating-point
// results, which data-parallel training depends on.

// next returns the next step number.
func (g *shmGroup) next() uint64 {
	g.step++
	return g.step
}

func (g *shmGroup) post(off int, s uint64) { g.seg.ctl(g.rank, off).Store(s) }

// waitFree waits until rank r may overwrite its slot for step s.
func (g *shmGroup) waitFree(op *shmOp, s uint64) error {
	if s <= uint64(g.seg.nbuf) {
		return nil
	}
	for k := 0; k < g.size; k++ {
		if k != g.rank {
			if err := g.await(op, k, shmCtlConsumed, s-uint64(g.seg.nbuf)); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitAll waits until every peer's counter at off reaches s; in the op's
// first step it also checks the peers are running the same collective.
func (g *shmGroup) awaitAll(op *shmOp, off int, s uint64) error {
	for k := 0; k < g.size; k++ {
		if k == g.rank {
			continue
		}
		if err := g.await(op, k, off, s); err != nil {
			return err
		}
		if s == op.step0 {
			if err := g.checkDesc(op, k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *shmGroup) awaitOne(op *shmOp, k, off int, s uint64) error {
	if err := g.await(op, k, off, s); err != nil {
		return err
	}
	if s == op.step0 {
		return g.checkDesc(op, k)
	}
	return nil
}

// The collective descriptor (seq, kind|dtype|op|root, bytes) lets a rank
// detect that a peer called a different collective at the same position,
// which would otherwise silently corrupt data or hang.
func shmDescWord(op *shmOp) uint64 {
	dt, _ := op.desc()
	return uint64(op.kind) | uint64(dt)<<8 | uint64(op.rop)<<16 | uint64(uint32(op.root))<<32
}

// writeDesc publishes the descriptor seqlock-style: the sequence word is
// cleared first and set last, so a reader that sees the same sequence
// before and after reading the fields has read a consistent descriptor.
func (g *shmGroup) writeDesc(op *shmOp) {
	g.seg.ctl(g.rank, shmCtlDescSeq).Store(0)
	g.seg.ctl(g.rank, shmCtlDescKind).Store(shmDescWord(op))
	g.seg.ctl(g.rank, shmCtlDescLen).Store(uint64(op.descBytes()))
	g.seg.ctl(g.rank, shmCtlDescOff).Store(uint64(op.arenaOff))
	g.seg.ctl(g.rank, shmCtlDescSeq).Store(op.seq)
}

func (g *shmGroup) checkDesc(op *shmOp, k int) error {
	seq := g.seg.ctl(k, shmCtlDescSeq).Load()
	if seq != op.seq {
		return nil // the peer has moved on to a later op; nothing to compare
	}
	kind := g.seg.ctl(k, shmCtlDescKind).Load()
	n := g.seg.ctl(k, shmCtlDescLen).Load()
	off := g.seg.ctl(k, shmCtlDescOff).Load()
	if g.seg.ctl(k, shmCtlDescSeq).Load() != seq {
		return nil
	}
	if kind == shmDescWord(op) && n == uint64(op.descBytes()) && off == uint64(op.arenaOff) {
		return nil
	}
	other := &shmOp{kind: shmKind(kind & 0xff), rop: backend.ReduceOp(kind >> 16 & 0xff), root: int(int32(kind >> 32)), seq: seq, arenaOff: int(off)}
	other.buf = backend.Buffer{DType: backend.DType(kind >> 8 & 0xff), Bytes: make([]byte, n)}
	other.in = other.buf
	return g.opError(op, backend.ErrBadArgument, []int{k}, fmt.Sprintf("mismatched collectives: rank %d called %s but rank %d called %s",
		g.rank, op.describe(), k, other.describe()), nil)
}

// exec runs op's algorithm; the caller holds execMu.
func (g *shmGroup) exec(op *shmOp) error {
	switch op.kind {
	case shmAllReduce:
		return g.allReduce(op)
	case shmBroadcast:
		return g.broadcast(op)
	case shmAllGather:
		return g.allGather(op)
	case shmReduceScatter:
		return g.reduceScatter(op)
	case shmReduce:
		return g.reduce(op)
	case shmGather:
		return g.gather(op)
	case shmScatter:
		return g.scatter(op)
	case shmAllToAll:
		return g.allToAll(op)
	case shmBarrier, shmMonitoredBarrier:
		return g.barrier(op)
	}
	return fmt.Errorf("%w: shm: unknown op %v", backend.ErrBadArgument, op.kind)
}

// combine folds src into dst (dst = dst op src), with the AVX kernel for
// float sums when the CPU has it.
func (g *shmGroup) combine(dst, src backend.Buffer, rop backend.ReduceOp) {
	if g.avx && (rop == backend.Sum || rop == backend.Avg) && reduce.AddFast(dst, src) {
		return
	}
	reduce.Into(dst, src, rop)
}

func shmSub(b backend.Buffer, lo, hi int) backend.Buffer {
	return backend.Buffer{DType: b.DType, Bytes: b.Bytes[lo:hi:hi]}
}

// reduceOrdered sets dst to x0 op x1 op ... op x(N-1), combined in rank
// order, where src(k) is rank k's contribution and own (rank r's) is
// already in dst. Op is commutative, so ranks 0 and 1 start from their own
// value; any other rank starts over from x0 (its own value comes back
// through src(r)).
func (g *shmGroup) reduceOrdered(dst backend.Buffer, src func(k int) []byte, rop backend.ReduceOp) {
	r := g.rank
	if g.size == 1 {
		return
	}
	if r <= 1 {
		g.combine(dst, backend.Buffer{DType: dst.DType, Bytes: src(1 - r)}, rop)
	} else {
		copy(dst.Bytes, src(0))
		g.combine(dst, backend.Buffer{DType: dst.DType, Bytes: src(1)}, rop)
	}
	for k := 2; k < g.size; k++ {
		g.combine(dst, backend.Buffer{DType: dst.DType, Bytes: src(k)}, rop)
	}
	if rop == backend.Avg {
		reduce.Divide(dst, g.size)
	}
}

// sliceBounds splits m elements of es bytes into N near-equal slices and
// returns slice k's byte range.
func shmSliceBounds(m, es, n, k int) (lo, hi int) {
	return m * k / n * es, m * (k + 1) / n * es
}

func (g *shmGroup) allReduce(op *shmOp) error {
	if op.vec != nil {
		return g.allReduceVec(op)
	}
	if op.root > 0 {
		return g.allReduceShared(op, op.buf)
	}
	buf := op.buf
	if len(buf.Bytes) == 0 || g.size == 1 {
		return nil
	}
	if len(buf.Bytes) <= g.smallMax {
		return g.allReduceSmall(op, buf)
	}
	if g.cma && len(buf.Bytes) >= g.cmaMin {
		return g.allReduceDirect(op, buf)
	}
	err := g.allReduceLarge(op, g.single(buf.Bytes))
	g.oneParts[0] = nil // do not keep the caller's buffer alive
	return err
}

func (g *shmGroup) allReduceSmall(op *shmOp, buf backend.Buffer) error {
	nb, r := len(buf.Bytes), g.rank
	s := g.next()
	if err := g.waitFree(op, s); err != nil {
		return err
	}
	copy(g.seg.slot(r, s), buf.Bytes)
	g.post(shmCtlPosted, s)
	if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
		return err
	}
	g.reduceOrdered(buf, func(k int) []byte { return g.seg.slot(k, s)[:nb] }, op.rop)
	g.post(shmCtlConsumed, s)
	return nil
}

// allReduceLarge is the chunked all-reduce of buf, which is one buffer or
// AllReduceV's list (the dtype is op's).
func (g *shmGroup) allReduceLarge(op *shmOp, buf *shmVec) error {
	r, n := g.rank, g.size
	dt := op.buf.DType
	es := dt.Size()
	chunkElems := g.chunkBytes / es
	total := buf.len() / es
	for o := 0; o < total; o += chunkElems {
		m := min(chunkElems, total-o)
		base, cb := o*es, m*es
		s := g.next()
		if err := g.waitFree(op, s); err != nil {
			return err
		}
		mine := g.seg.slot(r, s)
		lo, hi := shmSliceBounds(m, es, n, r)
		if r <= 1 {
			// Our own slice is reduced from the user buffer directly.
			buf.gather(mine[:lo], base)
			buf.gather(mine[hi:cb], base+hi)
		} else {
			buf.gather(mine[:cb], base)
		}
		g.post(shmCtlPosted, s)
		if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
			return err
		}
		for it := buf.pieces(base+lo, hi-lo); it.next(); {
			a, b := lo+it.at, lo+it.at+len(it.p)
			g.reduceOrdered(backend.Buffer{DType: dt, Bytes: it.p}, func(k int) []byte { return g.seg.slot(k, s)[a:b] }, op.rop)
			copy(mine[a:b], it.p)
		}
		g.post(shmCtlReduced, s)
		if err := g.collectSlices(op, s, buf, base, m, es); err != nil {
			return err
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

// eachReduced waits, for every other rank k, until k has posted its
// reduced slice of step s, and hands take that slice's byte range in a
// buffer of m elements of es bytes (the algorithms differ only in where
// they fetch it from: the slots, a shared region, the peer's memory).
func (g *shmGroup) eachReduced(op *shmOp, s uint64, m, es int, take func(k, lo, hi int) error) error {
	for k := 0; k < g.size; k++ {
		if k == g.rank {
			continue
		}
		if err := g.await(op, k, shmCtlReduced, s); err != nil {
			return err
		}
		lo, hi := shmSliceBounds(m, es, g.size, k)
		if err := take(k, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// collectSlices copies every other rank's reduced slice of step s from its
// slot into the chunk of buf at byte offset base.
func (g *shmGroup) collectSlices(op *shmOp, s uint64, buf *shmVec, base, m, es int) error {
	return g.eachReduced(op, s, m, es, func(k, lo, hi int) error {
		buf.scatter(base+lo, g.seg.slot(k, s)[lo:hi])
		return nil
	})
}

func (g *shmGroup) broadcast(op *shmOp) error {
	buf, r, root := op.buf, g.rank, op.root
	if g.size == 1 {
		return nil
	}
	step := g.seg.slotBytes
	for o := 0; o < len(buf.Bytes); o += step {
		part := buf.Bytes[o:min(o+step, len(buf.Bytes))]
		s := g.next()
		if r == root {
			if err := g.waitFree(op, s); err != nil {
				return err
			}
			copy(g.seg.slot(r, s), part)
			g.post(shmCtlPosted, s)
		} else {
			if err := g.awaitOne(op, root, shmCtlPosted, s); err != nil {
				return err
			}
			copy(part, g.seg.slot(root, s))
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

func (g *shmGroup) allGather(op *shmOp) error {
	in, out, r := op.in, op.buf, g.rank
	nb := len(in.Bytes)
	step := g.seg.slotBytes / in.DType.Size() * in.DType.Size()
	for o := 0; o < nb; o += step {
		part := in.Bytes[o:min(o+step, nb)]
		s := g.next()
		if g.size > 1 {
			if err := g.waitFree(op, s); err != nil {
				return err
			}
			copy(g.seg.slot(r, s), part)
			g.post(shmCtlPosted, s)
		}
		copy(out.Bytes[r*nb+o:], part)
		for k := 0; k < g.size; k++ {
			if k == r {
				continue
			}
			if err := g.awaitOne(op, k, shmCtlPosted, s); err != nil {
				return err
			}
			copy(out.Bytes[k*nb+o:k*nb+o+len(part)], g.seg.slot(k, s))
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

// pieceElems is how many elements of each of N pieces fit in one slot.
func (g *shmGroup) pieceElems(es int) int {
	return max(1, g.seg.slotBytes/(g.size*es))
}

func (g *shmGroup) reduceScatter(op *shmOp) error {
	in, out, r, n := op.in, op.buf, g.rank, g.size
	es := out.DType.Size()
	m := out.Len()
	L := g.pieceElems(es)
	for a := 0; a < m; a += L {
		l := min(L, m-a)
		pb := l * es
		piece := func(k int) []byte { return in.Bytes[(k*m+a)*es : (k*m+a)*es+pb] }
		s := g.next()
		dst := shmSub(out, a*es, a*es+pb)
		if n == 1 {
			copy(dst.Bytes, piece(0))
			continue
		}
		if err := g.waitFree(op, s); err != nil {
			return err
		}
		mine := g.seg.slot(r, s)
		for k := 0; k < n; k++ {
			if k != r || r >= 2 {
				copy(mine[k*pb:(k+1)*pb], piece(k))
			}
		}
		g.post(shmCtlPosted, s)
		if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
			return err
		}
		if r <= 1 {
			copy(dst.Bytes, piece(r))
		}
		g.reduceOrdered(dst, func(k int) []byte { return g.seg.slot(k, s)[r*pb : (r+1)*pb] }, op.rop)
		g.post(shmCtlConsumed, s)
	}
	return nil
}

func (g *shmGroup) reduce(op *shmOp) error {
	buf, r, n, root := op.buf, g.rank, g.size, op.root
	if len(buf.Bytes) == 0 || n == 1 {
		return nil
	}
	es := buf.DType.Size()
	if len(buf.Bytes) <= g.smallMax {
		s := g.next()
		if err := g.waitFree(op, s); err != nil {
			return err
		}
		copy(g.seg.slot(r, s), buf.Bytes)
		g.post(shmCtlPosted, s)
		if r == root {
			if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
				return err
			}
			nb := len(buf.Bytes)
			g.reduceOrdered(buf, func(k int) []byte { return g.seg.slot(k, s)[:nb] }, op.rop)
		}
		g.post(shmCtlConsumed, s)
		return nil
	}
	// Large: every rank reduces its slice into its own slot (never into its
	// user buffer, which a non-root must leave untouched), the root collects.
	chunkElems := g.chunkBytes / es
	total := buf.Len()
	for o := 0; o < total; o += chunkElems {
		m := min(chunkElems, total-o)
		chunk := buf.Bytes[o*es : (o+m)*es]
		s := g.next()
		if err := g.waitFree(op, s); err != nil {
			return err
		}
		mine := g.seg.slot(r, s)
		copy(mine, chunk)
		g.post(shmCtlPosted, s)
		if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
			return err
		}
		lo, hi := shmSliceBounds(m, es, n, r)
		if hi > lo {
			var dst backend.Buffer
			if r <= 1 {
				dst = shmSub(backend.Buffer{DType: buf.DType, Bytes: mine}, lo, hi)
			} else {
				dst = backend.Buffer{DType: buf.DType, Bytes: g.scratch[:hi-lo]}
			}
			g.reduceOrdered(dst, func(k int) []byte { return g.seg.slot(k, s)[lo:hi] }, op.rop)
			if r > 1 {
				copy(mine[lo:hi], dst.Bytes)
			}
		}
		g.post(shmCtlReduced, s)
		if r == root {
			copy(chunk[lo:hi], mine[lo:hi])
			if err := g.eachReduced(op, s, m, es, func(k, lo, hi int) error {
				copy(chunk[lo:hi], g.seg.slot(k, s)[lo:hi])
				return nil
			}); err != nil {
				return err
			}
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

func (g *shmGroup) gather(op *shmOp) error {
	in, out, r, root := op.in, op.buf, g.rank, op.root
	nb := len(in.Bytes)
	step := g.seg.slotBytes / in.DType.Size() * in.DType.Size()
	for o := 0; o < nb; o += step {
		part := in.Bytes[o:min(o+step, nb)]
		s := g.next()
		if r != root {
			if err := g.waitFree(op, s); err != nil {
				return err
			}
			copy(g.seg.slot(r, s), part)
			g.post(shmCtlPosted, s)
		} else {
			copy(out.Bytes[r*nb+o:], part)
			for k := 0; k < g.size; k++ {
				if k == r {
					continue
				}
				if err := g.awaitOne(op, k, shmCtlPosted, s); err != nil {
					return err
				}
				copy(out.Bytes[k*nb+o:k*nb+o+len(part)], g.seg.slot(k, s))
			}
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

func (g *shmGroup) scatter(op *shmOp) error {
	in, out, r, root, n := op.in, op.buf, g.rank, op.root, g.size
	es := out.DType.Size()
	m := out.Len()
	L := g.pieceElems(es)
	for a := 0; a < m; a += L {
		l := min(L, m-a)
		pb := l * es
		s := g.next()
		if r == root {
			if n > 1 {
				if err := g.waitFree(op, s); err != nil {
					return err
				}
				mine := g.seg.slot(r, s)
				for k := 0; k < n; k++ {
					if k != r {
						copy(mine[k*pb:(k+1)*pb], in.Bytes[(k*m+a)*es:])
					}
				}
				g.post(shmCtlPosted, s)
			}
			copy(out.Bytes[a*es:a*es+pb], in.Bytes[(r*m+a)*es:])
		} else {
			if err := g.awaitOne(op, root, shmCtlPosted, s); err != nil {
				return err
			}
			copy(out.Bytes[a*es:a*es+pb], g.seg.slot(root, s)[r*pb:(r+1)*pb])
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

func (g *shmGroup) allToAll(op *shmOp) error {
	in, out, r, n := op.in, op.buf, g.rank, g.size
	es := out.DType.Size()
	m := out.Len() / n
	L := g.pieceElems(es)
	for a := 0; a < m; a += L {
		l := min(L, m-a)
		pb := l * es
		s := g.next()
		if n > 1 {
			if err := g.waitFree(op, s); err != nil {
				return err
			}
			mine := g.seg.slot(r, s)
			for k := 0; k < n; k++ {
				if k != r {
					copy(mine[k*pb:(k+1)*pb], in.Bytes[(k*m+a)*es:])
				}
			}
			g.post(shmCtlPosted, s)
		}
		copy(out.Bytes[(r*m+a)*es:(r*m+a)*es+pb], in.Bytes[(r*m+a)*es:])
		for k := 0; k < n; k++ {
			if k == r {
				continue
			}
			if err := g.awaitOne(op, k, shmCtlPosted, s); err != nil {
				return err
			}
			copy(out.Bytes[(k*m+a)*es:(k*m+a)*es+pb], g.seg.slot(k, s)[r*pb:(r+1)*pb])
		}
		g.post(shmCtlConsumed, s)
	}
	return nil
}

// barrier: one data-less step. A monitored barrier that times out names
// every rank that has not arrived; it does not break the group, since the
// late ranks will find this rank's step posted when they arrive.
func (g *shmGroup) barrier(op *shmOp) error {
	s := g.next()
	g.post(shmCtlPosted, s)
	g.post(shmCtlConsumed, s)
	err := g.awaitAll(op, shmCtlPosted, s)
	if err == nil || op.kind != shmMonitoredBarrier {
		return err
	}
	var missing []int
	for k := 0; k < g.size; k++ {
		if k != g.rank && g.seg.ctl(k, shmCtlPosted).Load() < s {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	werr := g.opError(op, backend.ErrTimeout, missing, fmt.Sprintf("%s did not arrive within %v", backend.RankList(missing), op.timeout), nil)
	if !errors.Is(err, backend.ErrTimeout) {
		return werr // a dead or aborted peer: the group is broken anyway
	}
	return shmSoftError{werr}
}
