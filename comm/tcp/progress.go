package tcp

import (
	"encoding/binary"
	"fmt"
	"github.com/goddp/goddp/comm/internal/wire"
	"strings"
	"time"
)

// Progress queries and the stall inspector.
//
// Any rank can ask every peer where it is: the question and the answer are
// control frames handled by the connections' reader goroutines, so a peer
// answers even while its own worker is stuck in a collective or its
// program is busy computing. The stall inspector asks when a collective
// has waited longer than the threshold; a timeout asks once before failing,
// so the error names the ranks that never arrived.

// progressNote is one rank's answer.
type progressNote struct {
	rank      int
	started   uint64 // last collective started (sequence number)
	completed uint64 // last collective completed
	inOp      bool
	op        string // the collective in progress, if any
	bytes     int64
	waited    time.Duration // how long it has been in progress
	desc      opDesc        // the collective in progress, if any
}

func (n progressNote) encode() []byte {
	b := make([]byte, 0, 40+len(n.op))
	b = binary.BigEndian.AppendUint64(b, n.started)
	b = binary.BigEndian.AppendUint64(b, n.completed)
	b = binary.BigEndian.AppendUint64(b, uint64(n.bytes))
	b = binary.BigEndian.AppendUint64(b, uint64(n.waited.Milliseconds()))
	in := byte(0)
	if n.inOp {
		in = 1
	}
	b = append(b, in, byte(min(len(n.op), 255)))
	b = append(b, n.op[:min(len(n.op), 255)]...)
	return append(b, n.desc.encode()...)
}

func decodeProgress(rank int, b []byte) (progressNote, error) {
	d := wire.Decoder{B: b}
	n := progressNote{rank: rank, started: d.U64(), completed: d.U64(), bytes: int64(d.U64())}
	n.waited = time.Duration(min(d.U64(), 1<<40)) * time.Millisecond
	n.inOp = d.U8() == 1
	n.op = string(d.Take(int(d.U8())))
	if desc := d.Take(descLen); d.Err == nil {
		n.desc = decodeOpDesc(desc)
	}
	return n, d.Err
}

// localProgress is this rank's own note.
func (g *tcpGroup) localProgress() progressNote {
	n := progressNote{rank: g.rank, started: g.lastStarted.Load(), completed: g.lastCompleted.Load()}
	if o := g.cur.Load(); o != nil {
		n.inOp, n.op, n.bytes, n.waited, n.desc = true, o.name, int64(o.bytes), time.Since(o.start), o.desc
		n.started = o.seq
	}
	return n
}

// answerProgress replies to a peer's question.
func (g *tcpGroup) answerProgress(pc *peerConn, id uint64) {
	pc.send(&xfer{key: frameKey{kind: frameProgressReply, seq: id}, peer: pc.rank, buf: g.localProgress().encode()}, true)
}

// progressReply routes a peer's answer to the question's asker.
func (g *tcpGroup) progressReply(from int, id uint64, payload []byte) {
	n, err := decodeProgress(from, payload)
	if err != nil {
		return
	}
	g.progMu.Lock()
	ch := g.progWaiters[id]
	g.progMu.Unlock()
	if ch != nil {
		select {
		case ch <- n:
		default:
		}
	}
}

// queryProgress asks every peer where it is and waits up to wait for the
// answers; ranks that do not answer are absent from the result.
func (g *tcpGroup) queryProgress(wait time.Duration) map[int]progressNote {
	notes := map[int]progressNote{g.rank: g.localProgress()}
	if g.failure() != nil {
		return notes
	}
	ch := make(chan progressNote, g.size)
	g.progMu.Lock()
	g.progID++
	id := g.progID
	g.progWaiters[id] = ch
	g.progMu.Unlock()
	defer func() {
		g.progMu.Lock()
		delete(g.progWaiters, id)
		g.progMu.Unlock()
	}()
	for _, pc := range g.peers {
		// A connection a timeout cut carries nothing more (and a write
		// would fail the group for it).
		if pc != nil && !pc.cut.Load() {
			pc.send(&xfer{key: frameKey{kind: frameProgressReq, seq: id}, peer: pc.rank}, true)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(notes) < g.size {
		select {
		case n := <-ch:
			notes[n.rank] = n
		case <-timer.C:
			return notes
		case <-g.failed:
			return notes
		}
	}
	return notes
}

// laggards returns the ranks that have not started o (or did not answer),
// with a description of each.
func (g *tcpGroup) laggards(o *tcpOp, notes map[int]progressNote) ([]int, []string) {
	var ranks []int
	var words []string
	for r := 0; r < g.size; r++ {
		n, ok := notes[r]
		switch {
		case !ok:
			ranks = append(ranks, r)
			words = append(words, fmt.Sprintf("rank %d (no answer)", r))
		case n.started < o.seq:
			ranks = append(ranks, r)
			where := fmt.Sprintf("last started #%d", n.started)
			if n.inOp {
				where = fmt.Sprintf("in %s #%d (%d bytes) for %v", n.op, n.started, n.bytes, n.waited.Round(time.Millisecond))
			} else if n.completed == n.started {
				where += ", finished it; busy outside collectives"
			}
			words = append(words, fmt.Sprintf("rank %d (%s)", r, where))
		}
	}
	return ranks, words
}

// watchdog enforces the executing collective's deadline and runs the
// stall inspector; one ticker per group keeps every timer off the ops'
// hot path. Past the deadline it marks the op expired and cuts short any
// read or write the op is doing itself (inline), which then fails with
// ErrTimeout. When a collective has waited longer than th (and again every
// th after), it asks every rank where it is and logs the ranks that have
// not arrived; every rank that waits logs, so a late rank 0 is named by the
// others. Shortly before the deadline it asks once more and keeps the
// answers for the timeout's diagnosis (see timeoutFault). An op that has
// waited agreeProbeAfter asks once whether every rank runs the same
// collective (probeAgreement).
func (g *tcpGroup) watchdog(th time.Duration) {
	defer close(g.watchDone)
	tickEvery := min(max(g.timeout/20, 5*time.Millisecond), agreeProbeAfter/2)
	if th > 0 {
		tickEvery = min(tickEvery, max(th/4, 10*time.Millisecond))
	}
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	var last *tcpOp
	reported := 0
	for {
		select {
		case <-g.watchStop:
			return
		case <-tick.C:
		}
		o := g.cur.Load()
		if o == nil {
			continue
		}
		if time.Now().After(o.deadline) {
			g.expire(o)
			continue
		}
		if g.size == 1 {
			continue
		}
		if lead := probeLead(o.deadline.Sub(o.start)); !o.probed && lead > 0 && time.Until(o.deadline) <= lead {
			o.probed = true
			go func() {
				notes := g.queryProgress(lead / 2)
				o.preNotes.Store(&notes)
			}()
		}
		if !o.agreeProbed && time.Since(o.start) >= agreeProbeAfter {
			o.agreeProbed = true
			go g.probeAgreement(o)
		}
		if th <= 0 {
			continue
		}
		if o != last {
			last, reported = o, 0
		}
		waited := time.Since(o.start)
		if waited < th*time.Duration(reported+1) {
			continue
		}
		reported++
		g.reportStall(o, waited, min(max(th/2, time.Second), 5*time.Second))
	}
}

// probeLead is how long before a deadline of timeout the watchdog asks
// every rank where it is: a fifth of it, from 100 ms to 2 s; none for
// timeouts under 250 ms.
func probeLead(timeout time.Duration) time.Duration {
	if timeout < 250*time.Millisecond {
		return 0
	}
	return min(max(timeout/5, 100*time.Millisecond), 2*time.Second)
}

// expire marks o timed out and interrupts its inline I/O.
func (g *tcpGroup) expire(o *tcpOp) {
	o.expireOnce.Do(func() {
		close(o.expired)
		past := time.Unix(1, 0)
		for _, pc := range g.peers {
			if pc != nil && pc.inlineIO.Load() {
				pc.cut.Store(true)
				pc.conn.SetReadDeadline(past)
				pc.conn.SetWriteDeadline(past)
			}
		}
	})
}

// reportStall logs which ranks have not reached o, or that some rank runs
// another collective under o's number, which fails the group: o cannot
// complete.
func (g *tcpGroup) reportStall(o *tcpOp, waited, wait time.Duration) {
	notes := g.queryProgress(wait)
	if g.cur.Load() != o {
		return // it finished meanwhile
	}
	if f := g.mismatchIn(o, notes); f != nil {
		g.stallf("comm: stall: %s #%d (%d bytes) has waited %v on rank %d; %s",
			o.name, o.seq, o.bytes, waited.Round(time.Second), g.rank, f.detail)
		g.abort(f)
		return
	}
	_, words := g.laggards(o, notes)
	msg := "every rank has reached it; it waits on data (a slow or stuck peer connection)"
	if len(words) > 0 {
		msg = "not arrived: " + strings.Join(words, ", ")
	}
	g.stallf("comm: stall: %s #%d (%d bytes) has waited %v on rank %d; %s",
		o.name, o.seq, o.bytes, waited.Round(time.Second), g.rank, msg)
}
