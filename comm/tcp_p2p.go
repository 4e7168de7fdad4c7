package comm

import (
	"context"
	"errors"
	"fmt"
	"goddp/comm/backend"
	"goddp/comm/store"
	"slices"
	"time"
)

// Point-to-point ops bypass the worker: a send is queued on the peer's
// writer at once and a receive posted on its reader at once, so an
// isend/irecv pair never deadlocks behind a collective. Messages under one
// (peer, tag) match in order; large ones travel in pieces.

const p2pPieceBytes = 4 << 20

// Send sends buf to rank dst under tag.
func (g *tcpGroup) Send(buf Buffer, dst, tag int) Work {
	return g.p2p("send", buf, dst, tag, true)
}

// Recv receives exactly buf's size from rank src under tag.
func (g *tcpGroup) Recv(buf Buffer, src, tag int) Work {
	return g.p2p("recv", buf, src, tag, false)
}

func (g *tcpGroup) p2p(name string, buf Buffer, peer, tag int, isSend bool) Work {
	name = fmt.Sprintf("%s (rank %d, tag %d)", name, peer, tag)
	if err := checkBuf(buf); err != nil {
		return g.badArg(name, "%v", err)
	}
	if peer < 0 || peer >= g.size || peer == g.rank {
		return g.badArg(name, "peer %d is not another rank of a group of %d", peer, g.size)
	}
	k := p2pKey{peer, tag}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return backend.FailedFuture(&OpError{Kind: ErrClosed, Op: name, Bytes: len(buf.Bytes), Rank: g.rank, Detail: "process group closed"})
	}
	var idx uint32
	if isSend {
		idx = g.p2pSend[k]
		g.p2pSend[k]++
	} else {
		idx = g.p2pRecv[k]
		g.p2pRecv[k]++
	}
	g.mu.Unlock()

	np := max(1, (len(buf.Bytes)+p2pPieceBytes-1)/p2pPieceBytes)
	all := span{0, buf.Len()}
	es := buf.DType.Size()
	events := make(chan *xfer, np)
	xs := make([]*xfer, np)
	pc := g.peers[peer]
	for p := range xs {
		a, b := piece(all, p, np, es)
		x := &xfer{key: frameKey{kind: frameP2P, seq: uint64(int64(tag)), step: uint32(p), aux: idx},
			peer: peer, buf: buf.Bytes[a:b], events: events, send: isSend}
		xs[p] = x
		if isSend {
			pc.send(x, false)
		} else {
			pc.post(x)
		}
	}
	w := backend.NewFuture()
	o := &tcpOp{name: name, seq: uint64(idx) + 1, bytes: len(buf.Bytes)}
	go g.p2pWait(w, o, xs, events)
	return w
}

// p2pWait completes w once every piece is through, or fails it (and the
// group) at the timeout.
func (g *tcpGroup) p2pWait(w *backend.Future, o *tcpOp, xs []*xfer, events chan *xfer) {
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	for left := len(xs); left > 0; left-- {
		select {
		case x := <-events:
			x.done = true
			if x.err != nil {
				f := asFault(x.err)
				g.abort(f)
				<-g.failed
				w.Complete(g.opError(o, f, false))
				return
			}
		case <-timer.C:
			f := &peerFault{kind: ErrTimeout, peers: []int{xs[0].peer},
				detail: fmt.Sprintf("no matching %s from rank %d within %v", map[bool]string{true: "receive", false: "send"}[xs[0].send], xs[0].peer, g.timeout)}
			g.abort(f)
			<-g.failed
			w.Complete(g.opError(o, f, false))
			return
		}
	}
	w.Complete(nil)
}

// MonitoredBarrier is a barrier through rank 0 that, when some ranks do not
// arrive within timeout, fails on every rank that did with an error naming
// the missing ones (torch's monitored_barrier). It does not fail the group.
func (g *tcpGroup) MonitoredBarrier(ctx context.Context, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if timeout <= 0 {
		timeout = g.timeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	o := &tcpOp{name: "monitored_barrier", desc: opDesc{coll: collMonitoredBarrier}, soft: true}
	// Rank 0 decides at timeout (its own timer); the op's deadline leaves
	// time to tell the others.
	o.timeout = timeout + min(timeout, 5*time.Second) + time.Second
	o.run = func(o *tcpOp) error { return g.monitoredBarrier(o, timeout) }
	return g.submit(o).Wait(ctx)
}

func (g *tcpGroup) monitoredBarrier(o *tcpOp, timeout time.Duration) error {
	n := g.size
	if n == 1 {
		return nil
	}
	verdict := make([]byte, n) // 1 = did not arrive
	if g.rank != 0 {
		g.send(o, 0, 0, 0, nil)
		err := g.await(o, g.recv(o, 0, 1, 0, verdict))
		if err != nil {
			if errors.Is(err, ErrTimeout) {
				return &peerFault{kind: ErrTimeout, peers: []int{0},
					detail: fmt.Sprintf("rank 0 did not release the barrier within %v", o.timeout)}
			}
			return err
		}
		return verdictFault(verdict, timeout)
	}
	arrivals := make([]*xfer, n)
	for j := 1; j < n; j++ {
		arrivals[j] = g.recv(o, j, 0, 0, []byte{})
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for pendingArrivals(arrivals) > 0 {
		select {
		case x := <-g.events:
			if x.op != o {
				continue
			}
			x.done = true
			o.pending--
			if x.err != nil {
				// A rank that has left counts as missing.
				j := slices.Index(arrivals, x)
				if j < 0 || !errors.Is(x.err, ErrPeerFailed) || g.failure() != nil {
					return x.err
				}
				verdict[j] = 1
			}
		case <-g.failed:
			return g.cause.Load()
		case <-deadline.C:
			for j, x := range arrivals {
				if x != nil && !x.done {
					verdict[j] = 1
					g.peers[j].unpost(x.key)
					x.done = true
					o.pending--
				}
			}
		}
	}
	for j := 1; j < n; j++ {
		if verdict[j] == 0 {
			g.send(o, j, 1, 0, verdict)
		}
	}
	return verdictFault(verdict, timeout)
}

func pendingArrivals(xs []*xfer) int {
	n := 0
	for _, x := range xs {
		if x != nil && !x.done {
			n++
		}
	}
	return n
}

func verdictFault(verdict []byte, timeout time.Duration) error {
	var missing []int
	for j, v := range verdict {
		if v != 0 {
			missing = append(missing, j)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &peerFault{kind: ErrTimeout, peers: missing,
		detail: fmt.Sprintf("%s did not reach the barrier within %v", backend.RankList(missing), timeout)}
}

// NewGroup creates a group over ranks (torch's new_group): every rank of
// this group calls it with the same ranks, and ranks outside get (nil, nil).
// Ranks are sorted, so subgroup rank i is the i-th smallest member. The
// subgroup has its own connections, timeout and worker.
func (g *tcpGroup) NewGroup(ctx context.Context, ranks []int) (ProcessGroup, error) {
	members := slices.Clone(ranks)
	slices.Sort(members)
	for i, r := range members {
		if r < 0 || r >= g.size || (i > 0 && members[i-1] == r) {
			return nil, fmt.Errorf("%w: new group: ranks %v (group of %d)", ErrBadArgument, ranks, g.size)
		}
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: new group: no ranks", ErrBadArgument)
	}
	g.mu.Lock()
	g.subgroups++
	k := g.subgroups
	g.mu.Unlock()
	idx := slices.Index(members, g.rank)
	if idx < 0 {
		return nil, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	opts := g.opts
	opts.Rank, opts.Size = idx, len(members)
	sub := fmt.Sprintf("sub%d", k)
	opts.Store = store.NewPrefix(sub, g.opts.Store)
	opts.Prefix = g.opts.Prefix + "/" + sub
	pg, err := newTCPGroup(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("comm: new group %v: %w", members, err)
	}
	return pg, nil
}
