package tcp

import (
	"github.com/goddp/goddp/comm/internal/reduce"

	"github.com/goddp/goddp/comm/backend"
)

// Collective algorithms of the tcp backend. They run on the group's worker
// and only post receives, queue sends and wait; the connections' reader and
// writer goroutines move the bytes, so every link runs both ways at once
// and a reduction overlaps the transfer of the next piece.
//
// Small payloads (up to smallBytes) take latency-optimal paths: recursive
// doubling for all-reduce (a single exchange at world 2) and a binomial tree
// for broadcast. Large ones are bandwidth-optimal and pipelined in pieces of
// pieceBytes: ring reduce-scatter + ring all-gather for all-reduce, a chain
// for broadcast. Receives are posted before the first send, so payloads land
// straight in their destination (or scratch, when they must be reduced).
//
// Every algorithm gives bitwise-identical results on all ranks: each element
// is reduced along one chain and then copied, or (recursive doubling) both
// partners combine the same two operands and the ops are commutative.

func mod(a, n int) int { return ((a % n) + n) % n }

// scratchBuf returns the worker's receive scratch, at least n bytes.
func (g *tcpGroup) scratchBuf(n int) []byte {
	if cap(g.scratch) < n {
		g.scratch = make([]byte, n)
	}
	return g.scratch[:n]
}

// workBuf returns the worker's second scratch (a copy of a read-only input).
func (g *tcpGroup) workBuf(n int) []byte {
	if cap(g.work) < n {
		g.work = make([]byte, n)
	}
	return g.work[:n]
}

// minPieces and minPieceBytes: see pieces.
const (
	minPieces     = 4
	minPieceBytes = 64 << 10
)

// maxXfersPerOp keeps one op's transfers well inside the event queue.
const maxXfersPerOp = 1 << 14

// pieces is how many pipelined pieces a chunk of chunkBytes is cut into,
// given that the op moves `chunks` such chunks each way.
//
// A chunk is cut into pieces of at most pieceBytes, and into at least
// minPieces when it is big enough, so that even a mid-sized chunk overlaps
// the reduction of one piece with the transfer of the next.
func (g *tcpGroup) pieces(chunkBytes, chunks int) int {
	np := (chunkBytes + g.pieceBytes - 1) / g.pieceBytes
	np = max(np, min(minPieces, chunkBytes/minPieceBytes))
	np = max(np, (chunkBytes+maxFramePayload-1)/maxFramePayload)
	limit := max(1, maxXfersPerOp/(2*max(chunks, 1)))
	return max(1, min(np, limit))
}

// span is an element range [lo, hi) of a buffer.
type span struct{ lo, hi int }

// splitEven cuts n elements into k near-equal spans (the first n%k get one more).
func splitEven(n, k int) []span {
	s := make([]span, k)
	q, r := n/k, n%k
	lo := 0
	for i := range s {
		hi := lo + q
		if i < r {
			hi++
		}
		s[i] = span{lo, hi}
		lo = hi
	}
	return s
}

// maxPieceBytes is the size of the largest of np pieces of n elements of
// es bytes (see piece).
func maxPieceBytes(n, np, es int) int { return (n + np - 1) / np * es }

// piece returns the byte range of piece p of np of span s.
func piece(s span, p, np, es int) (int, int) {
	n := s.hi - s.lo
	return (s.lo + n*p/np) * es, (s.lo + n*(p+1)/np) * es
}

func (g *tcpGroup) allReduce(o *tcpOp, buf backend.Buffer, op backend.ReduceOp) error {
	if g.size > 1 {
		var err error
		switch {
		case len(buf.Bytes) <= g.smallBytes || buf.Len() < g.size:
			err = g.recursiveDoubling(o, buf, op)
		case g.size == 2 && len(buf.Bytes) <= g.exchangeBytes:
			err = g.exchange(o, buf, op)
		default:
			err = g.ring(o, buf, splitEven(buf.Len(), g.size), op, true)
		}
		if err != nil {
			return err
		}
	}
	if op == backend.Avg {
		// Wait for the last sends: they read buf.
		if err := g.awaitAll(o); err != nil {
			return err
		}
		reduce.Divide(buf, g.size)
	}
	return nil
}

// recursiveDoubling all-reduces buf in log2(size) exchanges. With a size
// that is not a power of two, the first 2*rem ranks pair up: the even one
// hands its data to the odd one, sits out, and gets the result at the end.
func (g *tcpGroup) recursiveDoubling(o *tcpOp, buf backend.Buffer, op backend.ReduceOp) error {
	n, r := g.size, g.rank
	p := 1
	for p*2 <= n {
		p *= 2
	}
	rem := n - p
	tmp := backend.Buffer{DType: buf.DType, Bytes: g.scratchBuf(len(buf.Bytes))}
	if n == 2 {
		// One exchange (step 1, as below) in the progress loop if it can.
		if ok, err := g.exchangeFast(o, 1-r, 1, buf, tmp.Bytes, 1, op); ok {
			return err
		}
	}
	const finalStep = 1 << 20
	vr := r - rem
	if r < 2*rem {
		if r%2 == 0 {
			// The result overwrites buf: receive it once the send is out.
			if err := g.await(o, g.send(o, r+1, 0, 0, buf.Bytes)); err != nil {
				return err
			}
			return g.await(o, g.recvQuiet(o, r+1, finalStep, 0, buf.Bytes))
		}
		if err := g.await(o, g.recvQuiet(o, r-1, 0, 0, tmp.Bytes)); err != nil {
			return err
		}
		reduce.Into(buf, tmp, op)
		vr = r / 2
	}
	real := func(v int) int {
		if v < rem {
			return 2*v + 1
		}
		return v + rem
	}
	for mask, step := 1, uint32(1); mask < p; mask, step = mask*2, step+1 {
		partner := real(vr ^ mask)
		x := g.recvQuiet(o, partner, step, 0, tmp.Bytes)
		s := g.send(o, partner, step, 0, buf.Bytes)
		if err := g.await(o, x); err != nil {
			return err
		}
		// The send reads buf: it must be out before buf changes.
		if err := g.await(o, s); err != nil {
			return err
		}
		reduce.Into(buf, tmp, op)
	}
	if r < 2*rem {
		g.send(o, r-1, finalStep, 0, buf.Bytes)
	}
	return nil
}

// exchangePieceBytes and exchangeBatchBytes are the two-rank exchange's
// grain: pieces are reduced as they land, and the single-thread loop
// (exchange_linux.go) writes at most a batch before it turns to
// reading, so that both directions and the reductions interleave. The grain
// trades per-piece overhead (syscalls, wakeups) against how soon the
// reduction can start and how much of a piece stays in cache (L2 holds a
// 512 KiB batch on current x86); a faster link or a core per direction
// would favour larger pieces. Measured with two ranks, one core each, in
// interleaved runs (with reno on loopback, see congestionFor), 1 MiB pieces and 512 KiB batches against 256 KiB and
// 128 KiB: 1 MiB all-reduce 203-280 us against 389-992 (3 of 4 rounds),
// 4 MiB 1.34-1.48 ms against 1.57-1.86, 64 MiB 26-32 ms against 29-36.
// With them the exchange also beats the ring (GODDP_TCP_EXCHANGE_BYTES) up
// to 64 MiB, although it reduces twice as much: 16 MiB 7.9-8.8 ms against
// 9.7-13.0, 64 MiB 31-35 against 34-41.
const (
	exchangePieceBytes = 1 << 20
	exchangeBatchBytes = 512 << 10
	// exchangeSlots is how many received pieces the progress loop holds
	// before it reduces them, so its scratch is a few MiB that stay in
	// cache however large the message.
	exchangeSlots = 4
)

// exchange all-reduces buf between two ranks in one pipelined phase: each
// streams its whole buffer to the other and reduces every piece as it
// lands. The ring moves as many bytes but in two dependent phases.
func (g *tcpGroup) exchange(o *tcpOp, buf backend.Buffer, op backend.ReduceOp) error {
	peer := 1 - g.rank
	es := buf.DType.Size()
	all := span{0, buf.Len()}
	np := min(max(1, (len(buf.Bytes)+exchangePieceBytes-1)/exchangePieceBytes), maxXfersPerOp/2)
	// The progress loop reuses a few piece-sized slots, which stay in
	// cache; the queued path below needs the whole scratch.
	slotBytes := exchangeSlots * maxPieceBytes(buf.Len(), np, es)
	if ok, err := g.exchangeFast(o, peer, 0, buf, g.scratchBuf(min(len(buf.Bytes), slotBytes)), np, op); ok {
		return err
	}
	scratch := g.scratchBuf(len(buf.Bytes))
	recvs := make([]*xfer, np)
	sends := make([]*xfer, np)
	for p := range np {
		a, b := piece(all, p, np, es)
		recvs[p] = g.recvQuiet(o, peer, 0, uint32(p), scratch[a:b])
	}
	for p := range np {
		a, b := piece(all, p, np, es)
		sends[p] = g.send(o, peer, 0, uint32(p), buf.Bytes[a:b])
	}
	for p := range np {
		// The piece must be out before it changes.
		if err := g.await(o, recvs[p]); err != nil {
			return err
		}
		if err := g.await(o, sends[p]); err != nil {
			return err
		}
		a, b := piece(all, p, np, es)
		reduce.Into(backend.Buffer{DType: buf.DType, Bytes: buf.Bytes[a:b]}, backend.Buffer{DType: buf.DType, Bytes: scratch[a:b]}, op)
	}
	return nil
}

// ring runs a pipelined ring reduce-scatter over data cut into the given
// spans (one per rank), after which rank r holds the reduction of span r,
// and, with gather, a ring all-gather that leaves every span everywhere.
//
// Reduce-scatter step s sends span r-s-1 to the right and reduces span
// r-s-2 arriving from the left; all-gather step t forwards span r-t. A
// piece is sent on as soon as it is reduced (or received), so the steps
// overlap. Reduce-scatter receives are all posted up front, into scratch.
// The all-gather receive of a piece lands straight in data, overwriting
// the partial sum this rank sent at reduce-scatter step t; it is posted
// the moment that send is out (the final value cannot arrive earlier, as
// it depends on that send), so the overwrite is ordered after the send by
// the program and not only by the network.
func (g *tcpGroup) ring(o *tcpOp, data backend.Buffer, spans []span, op backend.ReduceOp, gather bool) error {
	n, r := g.size, g.rank
	es := data.DType.Size()
	left, right := mod(r-1, n), mod(r+1, n)
	maxLen := 0
	for _, s := range spans {
		maxLen = max(maxLen, s.hi-s.lo)
	}
	steps := n - 1
	if gather {
		steps *= 2
	}
	np := g.pieces(maxLen*es, steps)
	scratch := g.scratchBuf((n - 1) * maxLen * es)

	rs := make([]*xfer, (n-1)*np)
	for s := 0; s < n-1; s++ {
		sp := spans[mod(r-s-2, n)]
		base := s*maxLen*es - sp.lo*es
		for p := 0; p < np; p++ {
			a, b := piece(sp, p, np, es)
			rs[s*np+p] = g.recv(o, left, uint32(s), uint32(p), scratch[base+a:base+b])
		}
	}
	var ag []*xfer
	if gather {
		ag = make([]*xfer, (n-1)*np)
	}
	// sendRS sends piece p of reduce-scatter step s and arms the matching
	// all-gather receive.
	sendRS := func(s, p int, buf []byte) {
		x := g.send(o, right, uint32(s), uint32(p), buf)
		if gather {
			x.then = func() { ag[s*np+p] = g.recv(o, left, uint32(n-1+s), uint32(p), buf) }
		}
	}
	first := spans[mod(r-1, n)]
	for p := 0; p < np; p++ {
		a, b := piece(first, p, np, es)
		sendRS(0, p, data.Bytes[a:b])
	}
	for s := 0; s < n-1; s++ {
		sp := spans[mod(r-s-2, n)]
		for p := 0; p < np; p++ {
			x := rs[s*np+p]
			if err := g.await(o, x); err != nil {
				return err
			}
			a, b := piece(sp, p, np, es)
			reduce.Into(backend.Buffer{DType: data.DType, Bytes: data.Bytes[a:b]}, backend.Buffer{DType: data.DType, Bytes: x.buf}, op)
			switch {
			case s < n-2:
				sendRS(s+1, p, data.Bytes[a:b])
			case gather:
				g.send(o, right, uint32(n-1), uint32(p), data.Bytes[a:b])
			}
		}
	}
	if !gather {
		return nil
	}
	for t := 0; t < n-1; t++ {
		sp := spans[mod(r-t-1, n)]
		for p := 0; p < np; p++ {
			// Armed when the step-t send completed; wait for that first.
			for ag[t*np+p] == nil {
				if err := g.next(o); err != nil {
					return err
				}
			}
			if t == n-2 {
				continue // the last pieces are not forwarded; awaitAll collects them
			}
			if err := g.await(o, ag[t*np+p]); err != nil {
				return err
			}
			a, b := piece(sp, p, np, es)
			g.send(o, right, uint32(n+t), uint32(p), data.Bytes[a:b])
		}
	}
	return nil
}

func (g *tcpGroup) broadcast(o *tcpOp, buf backend.Buffer, root int) error {
	n := g.size
	if n == 1 {
		return nil
	}
	vr := mod(g.rank-root, n)
	if len(buf.Bytes) <= g.smallBytes {
		// Binomial tree: receive from the parent, then feed the subtrees.
		mask := 1
		for mask < n {
			if vr&mask != 0 {
				if err := g.await(o, g.recvQuiet(o, mod(vr-mask+root, n), 0, 0, buf.Bytes)); err != nil {
					return err
				}
				break
			}
			mask <<= 1
		}
		for mask >>= 1; mask > 0; mask >>= 1 {
			if vr+mask < n {
				g.send(o, mod(vr+mask+root, n), 0, 0, buf.Bytes)
			}
		}
		return nil
	}
	// Pipelined chain root -> root+1 -> ...: each piece moves on as it lands.
	all := span{0, buf.Len()}
	es := buf.DType.Size()
	np := g.pieces(len(buf.Bytes), 2)
	prev, next := mod(g.rank-1, n), mod(g.rank+1, n)
	if vr == 0 {
		for p := 0; p < np; p++ {
			a, b := piece(all, p, np, es)
			g.send(o, next, 0, uint32(p), buf.Bytes[a:b])
		}
		return nil
	}
	xs := make([]*xfer, np)
	for p := range xs {
		a, b := piece(all, p, np, es)
		xs[p] = g.recv(o, prev, 0, uint32(p), buf.Bytes[a:b])
	}
	if vr == n-1 {
		return nil
	}
	for p, x := range xs {
		if err := g.await(o, x); err != nil {
			return err
		}
		a, b := piece(all, p, np, es)
		g.send(o, next, 0, uint32(p), buf.Bytes[a:b])
	}
	return nil
}

// barrier is a dissemination barrier: log2(size) rounds of empty frames.
func (g *tcpGroup) barrier(o *tcpOp) error {
	n, r := g.size, g.rank
	for k, step := 1, uint32(0); k < n; k, step = k*2, step+1 {
		x := g.recvQuiet(o, mod(r-k, n), step, 0, []byte{})
		g.send(o, mod(r+k, n), step, 0, nil)
		if err := g.await(o, x); err != nil {
			return err
		}
	}
	return nil
}

func (g *tcpGroup) allGather(o *tcpOp, out, in backend.Buffer) error {
	n, r := g.size, g.rank
	es := in.DType.Size()
	m := in.Len()
	spans := chunkSpans(n, m)
	copy(out.Bytes[r*m*es:], in.Bytes)
	if n == 1 {
		return nil
	}
	left, right := mod(r-1, n), mod(r+1, n)
	np := g.pieces(len(in.Bytes), n-1)
	xs := make([]*xfer, (n-1)*np)
	for t := 0; t < n-1; t++ {
		sp := spans[mod(r-t-1, n)]
		for p := 0; p < np; p++ {
			a, b := piece(sp, p, np, es)
			xs[t*np+p] = g.recv(o, left, uint32(t), uint32(p), out.Bytes[a:b])
		}
	}
	for p := 0; p < np; p++ {
		a, b := piece(spans[r], p, np, es)
		g.send(o, right, 0, uint32(p), out.Bytes[a:b])
	}
	for t := 0; t < n-2; t++ {
		sp := spans[mod(r-t-1, n)]
		for p := 0; p < np; p++ {
			if err := g.await(o, xs[t*np+p]); err != nil {
				return err
			}
			a, b := piece(sp, p, np, es)
			g.send(o, right, uint32(t+1), uint32(p), out.Bytes[a:b])
		}
	}
	return nil
}

func (g *tcpGroup) reduceScatter(o *tcpOp, out, in backend.Buffer, op backend.ReduceOp) error {
	n, r := g.size, g.rank
	m := out.Len()
	es := out.DType.Size()
	if n > 1 {
		// The ring reduces in place; in is read-only, so work on a copy.
		data := backend.Buffer{DType: in.DType, Bytes: g.workBuf(len(in.Bytes))}
		copy(data.Bytes, in.Bytes)
		if err := g.ring(o, data, chunkSpans(n, m), op, false); err != nil {
			return err
		}
		copy(out.Bytes, data.Bytes[r*m*es:(r+1)*m*es])
	} else {
		copy(out.Bytes, in.Bytes)
	}
	if op == backend.Avg {
		reduce.Divide(out, n)
	}
	return nil
}

func (g *tcpGroup) reduce(o *tcpOp, buf backend.Buffer, root int, op backend.ReduceOp) error {
	n, r := g.size, g.rank
	if n == 1 {
		if op == backend.Avg {
			reduce.Divide(buf, 1)
		}
		return nil
	}
	data := buf
	if r != root {
		// Leave the caller's buffer alone off the root.
		data = backend.Buffer{DType: buf.DType, Bytes: g.workBuf(len(buf.Bytes))}
		copy(data.Bytes, buf.Bytes)
	}
	if len(buf.Bytes) <= g.smallBytes || buf.Len() < n {
		if err := g.recursiveDoubling(o, data, op); err != nil {
			return err
		}
	} else {
		// Ring reduce-scatter, then every rank sends its reduced span to root.
		spans := splitEven(buf.Len(), n)
		if err := g.ring(o, data, spans, op, false); err != nil {
			return err
		}
		es := buf.DType.Size()
		step := uint32(n)
		// Root's gather receives overwrite spans it has sent: let those out first.
		if err := g.awaitAll(o); err != nil {
			return err
		}
		if r != root {
			np := g.pieces((spans[r].hi-spans[r].lo)*es, 1)
			for p := 0; p < np; p++ {
				a, b := piece(spans[r], p, np, es)
				g.send(o, root, step, uint32(p), data.Bytes[a:b])
			}
		} else {
			for j := 0; j < n; j++ {
				if j == root {
					continue
				}
				np := g.pieces((spans[j].hi-spans[j].lo)*es, 1)
				for p := 0; p < np; p++ {
					a, b := piece(spans[j], p, np, es)
					g.recv(o, j, step, uint32(p), data.Bytes[a:b])
				}
			}
		}
	}
	if err := g.awaitAll(o); err != nil {
		return err
	}
	if op == backend.Avg && r == root {
		reduce.Divide(buf, n)
	}
	return nil
}

// chunkSpans cuts a buffer of n chunks of m elements.
func chunkSpans(n, m int) []span {
	s := make([]span, n)
	for i := range s {
		s[i] = span{i * m, (i + 1) * m}
	}
	return s
}

func (g *tcpGroup) gather(o *tcpOp, out, in backend.Buffer, root int) error {
	es := in.DType.Size()
	m := in.Len()
	np := g.pieces(len(in.Bytes), g.size-1)
	if g.rank != root {
		all := span{0, m}
		for p := 0; p < np; p++ {
			a, b := piece(all, p, np, es)
			g.send(o, root, 0, uint32(p), in.Bytes[a:b])
		}
		return nil
	}
	spans := chunkSpans(g.size, m)
	for j := 0; j < g.size; j++ {
		if j == root {
			continue
		}
		for p := 0; p < np; p++ {
			a, b := piece(spans[j], p, np, es)
			g.recv(o, j, 0, uint32(p), out.Bytes[a:b])
		}
	}
	copy(out.Bytes[root*m*es:], in.Bytes)
	return nil
}

func (g *tcpGroup) scatter(o *tcpOp, out, in backend.Buffer, root int) error {
	es := out.DType.Size()
	m := out.Len()
	np := g.pieces(len(out.Bytes), g.size-1)
	if g.rank != root {
		all := span{0, m}
		for p := 0; p < np; p++ {
			a, b := piece(all, p, np, es)
			g.recv(o, root, 0, uint32(p), out.Bytes[a:b])
		}
		return nil
	}
	spans := chunkSpans(g.size, m)
	for k := 1; k < g.size; k++ {
		j := mod(root+k, g.size)
		for p := 0; p < np; p++ {
			a, b := piece(spans[j], p, np, es)
			g.send(o, j, 0, uint32(p), in.Bytes[a:b])
		}
	}
	copy(out.Bytes, in.Bytes[root*m*es:(root+1)*m*es])
	return nil
}

func (g *tcpGroup) allToAll(o *tcpOp, out, in backend.Buffer) error {
	n, r := g.size, g.rank
	es := in.DType.Size()
	m := in.Len() / n
	spans := chunkSpans(n, m)
	np := g.pieces(m*es, 2*(n-1))
	for k := 1; k < n; k++ {
		j := mod(r-k, n)
		for p := 0; p < np; p++ {
			a, b := piece(spans[j], p, np, es)
			g.recv(o, j, 0, uint32(p), out.Bytes[a:b])
		}
	}
	// Staggered destinations spread the load over the links.
	for k := 1; k < n; k++ {
		j := mod(r+k, n)
		for p := 0; p < np; p++ {
			a, b := piece(spans[j], p, np, es)
			g.send(o, j, 0, uint32(p), in.Bytes[a:b])
		}
	}
	a, b := spans[r].lo*es, spans[r].hi*es
	copy(out.Bytes[a:b], in.Bytes[a:b])
	return nil
}
