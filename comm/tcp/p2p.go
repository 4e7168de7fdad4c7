package tcp

import (
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"time"
)

// Point-to-point ops bypass the worker: a send is queued on the peer's
// writer at once and a receive posted on its reader at once, so an
// isend/irecv pair never deadlocks behind a collective. Messages under one
// (peer, tag) match in order; large ones travel in pieces.

const p2pPieceBytes = 4 << 20

// Send sends buf to rank dst under tag.
func (g *tcpGroup) Send(buf backend.Buffer, dst, tag int) backend.Work {
	return g.p2p("send", buf, dst, tag, true)
}

// Recv receives exactly buf's size from rank src under tag.
func (g *tcpGroup) Recv(buf backend.Buffer, src, tag int) backend.Work {
	return g.p2p("recv", buf, src, tag, false)
}

func (g *tcpGroup) p2p(name string, buf backend.Buffer, peer, tag int, isSend bool) backend.Work {
	name = fmt.Sprintf("%s (rank %d, tag %d)", name, peer, tag)
	if err := backend.CheckBuffer(buf); err != nil {
		return g.badArg(name, "%v", err)
	}
	if peer < 0 || peer >= g.size || peer == g.rank {
		return g.badArg(name, "peer %d is not another rank of a group of %d", peer, g.size)
	}
	k := p2pKey{peer, tag}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return backend.FailedFuture(&backend.OpError{Kind: backend.ErrClosed, Op: name, Bytes: len(buf.Bytes), Rank: g.rank, Detail: "process group closed"})
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
			f := &peerFault{kind: backend.ErrTimeout, peers: []int{xs[0].peer},
				detail: fmt.Sprintf("no matching %s from rank %d within %v", map[bool]string{true: "receive", false: "send"}[xs[0].send], xs[0].peer, g.timeout)}
			g.abort(f)
			<-g.failed
			w.Complete(g.opError(o, f, false))
			return
		}
	}
	w.Complete(nil)
}
