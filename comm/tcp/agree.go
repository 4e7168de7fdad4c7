package tcp

import (
	"bytes"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"strings"
	"time"
)

// Collective agreement: every rank must issue the same collective (kind,
// dtype, reduce op, count, root) under each sequence number. A rank that
// took another branch would otherwise hang until the timeout (frames that
// never match a receive) or, with the same frames, silently reduce with
// another op or dtype. Three checks, none on the per-piece path:
//
//   - the first data frame of a collective to each peer carries the
//     sender's descriptor (frame.go), which the receiver compares with its
//     own collective of that number (checkDesc): a mismatch between two
//     ranks that exchange any data fails at once;
//   - a collective that has waited agreeProbeAfter asks every rank what it
//     runs (probeAgreement), for the ranks that exchange nothing (each
//     waits to receive, say, from a different root);
//   - the stall inspector and the timeout's diagnosis compare what the
//     ranks run, not only how far they got (mismatchIn).
//
// The rank that finds a mismatch fails its group, whose abort frames carry
// the message naming both collectives to every other rank.

// agreeProbeAfter is how long a collective waits before it asks every rank
// what it runs. Such a wait is rare in a healthy job (a late rank), and then
// costs one small control frame to each peer and back.
const agreeProbeAfter = time.Second

// agree checks a peer's descriptor of o.
func (g *tcpGroup) agree(o *tcpOp, peer int, d opDesc) error {
	if d == o.desc {
		return nil
	}
	return g.mismatchFault(o.seq, o.desc, peer, d)
}

// checkDesc compares the descriptor pc's peer sent with its collective #seq
// with this rank's own #seq: at once when that is the op in progress, else
// once this rank starts it (startDescs). The connection's reader calls it
// before the frame is matched with any receive.
func (pc *peerConn) checkDesc(seq uint64, d opDesc) error {
	g := pc.g
	if o := g.cur.Load(); o != nil && o.seq == seq {
		return g.agree(o, pc.rank, d)
	}
	pc.mu.Lock()
	if pc.early == nil {
		pc.early = map[uint64]opDesc{}
	}
	if _, dup := pc.early[seq]; !dup {
		g.earlyDescs.Add(1)
	}
	pc.early[seq] = d
	pc.mu.Unlock()
	// The op may have started since the look above, and startDescs may
	// have looked before the descriptor was stored: see to it here.
	if o := g.cur.Load(); o != nil && o.seq == seq {
		if d, ok := pc.takeEarly(seq); ok {
			return g.agree(o, pc.rank, d)
		}
	}
	return nil
}

// maxEarlyDescs bounds a connection's early descriptors before those of
// finished collectives (a late frame of a monitored barrier that gave up)
// are swept.
const maxEarlyDescs = 1024

// takeEarly removes and returns the descriptor held for collective seq.
func (pc *peerConn) takeEarly(seq uint64) (opDesc, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	d, ok := pc.early[seq]
	if ok {
		delete(pc.early, seq)
		pc.g.earlyDescs.Add(-1)
	}
	if len(pc.early) > maxEarlyDescs {
		for s := range pc.early {
			if s < seq {
				delete(pc.early, s)
				pc.g.earlyDescs.Add(-1)
			}
		}
	}
	return d, ok
}

// startDescs checks the descriptors of o that arrived before o started;
// g.cur is o.
func (g *tcpGroup) startDescs(o *tcpOp) error {
	if g.earlyDescs.Load() == 0 {
		return nil
	}
	for _, pc := range g.peers {
		if pc == nil {
			continue
		}
		if d, ok := pc.takeEarly(o.seq); ok {
			if err := g.agree(o, pc.rank, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// mismatchIn returns the fault of the first rank whose answer says it runs
// another collective than o under o's number, or nil.
func (g *tcpGroup) mismatchIn(o *tcpOp, notes map[int]progressNote) *peerFault {
	for r := 0; r < g.size; r++ {
		if n, ok := notes[r]; ok && r != g.rank && n.inOp && n.started == o.seq && n.desc != o.desc {
			return g.mismatchFault(o.seq, o.desc, r, n.desc)
		}
	}
	return nil
}

// probeAgreement asks every rank what it runs and fails the group if some
// rank runs another collective under o's number. When two ranks disagree,
// the later of them to start probes once both are in: at least one of
// them sees the other's answer.
func (g *tcpGroup) probeAgreement(o *tcpOp) {
	notes := g.queryProgress(agreeProbeAfter)
	if g.cur.Load() != o {
		return // it finished meanwhile
	}
	if f := g.mismatchIn(o, notes); f != nil {
		g.abort(f)
	}
}

// checkAgreement (debug mode) exchanges o's descriptor with every peer and
// fails, on every rank, when any rank issued a different collective. The
// descriptors of data frames catch the same mismatches; this check makes
// every rank compare with every other before any data moves.
func (g *tcpGroup) checkAgreement(o *tcpOp) error {
	mine := o.desc.encode()
	theirs := make([][]byte, g.size)
	for j := range g.size {
		if j == g.rank {
			continue
		}
		theirs[j] = make([]byte, len(mine))
		g.peers[j].post(g.newXfer(o, j, frameCheck, 0, 0, theirs[j]))
	}
	for j := range g.size {
		if j != g.rank {
			x := g.newXfer(o, j, frameCheck, 0, 0, mine)
			x.send = true
			g.peers[j].send(x, false)
		}
	}
	if err := g.awaitAll(o); err != nil {
		return err
	}
	var bad []int
	var words []string
	for j, b := range theirs {
		if b != nil && !bytes.Equal(b, mine) {
			bad = append(bad, j)
			words = append(words, fmt.Sprintf("rank %d issued %v", j, decodeOpDesc(b)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &peerFault{kind: backend.ErrBadArgument, peers: bad,
		detail: fmt.Sprintf("collective #%d mismatch: rank %d issued %v, %s",
			o.seq, g.rank, o.desc, strings.Join(words, ", "))}
}
