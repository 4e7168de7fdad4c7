package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"sync/atomic"
	"time"
)

// Point-to-point. Messages from rank i to rank j stream through the byte
// ring (i, j) of the segment: a 16-byte header (tag, length), the payload,
// and padding to 8 bytes. The sender advances "written", the receiver
// "consumed", both as monotonic byte counts, so a message larger than the
// ring simply streams through it while both sides run.
//
// Sends to one peer run in issue order on a goroutine of their own, and so
// do receives from one peer, so point-to-point traffic never waits behind a
// collective (or the reverse), and a pair of ranks that both send before
// they receive does not deadlock. Messages between two ranks with one tag
// arrive in order; a receive for tag t that finds a message with another
// tag first moves that one aside (into memory) for a later receive.

// shmP2PQueue is the FIFO of sends to, or receives from, one peer.
type shmP2PQueue struct {
	ops     []*shmOp
	running bool
	// Worker-only state (only the goroutine that drains the queue uses it).
	pos    uint64             // our position in the ring
	broken error              // a failed transfer leaves the stream unusable
	stash  map[int64][][]byte // receive side: messages that arrived before their Recv
}

const shmHdrBytes = 16

func (g *shmGroup) p2pArg(buf backend.Buffer, peer int) error {
	if err := backend.CheckBuffer(buf); err != nil {
		return err
	}
	if peer < 0 || peer >= g.size || peer == g.rank {
		return fmt.Errorf("peer %d: want another rank of a group of %d", peer, g.size)
	}
	return nil
}

// Send sends buf to rank dst with tag.
func (g *shmGroup) Send(buf backend.Buffer, dst, tag int) backend.Work {
	if err := g.p2pArg(buf, dst); err != nil {
		return g.badArg(shmSend, "%v", err)
	}
	return g.submitP2P(&shmOp{kind: shmSend, buf: buf, root: dst, tag: int64(tag)}, g.sendQs[dst])
}

// Recv receives into buf the next message from rank src with tag; the
// message must have buf's size.
func (g *shmGroup) Recv(buf backend.Buffer, src, tag int) backend.Work {
	if err := g.p2pArg(buf, src); err != nil {
		return g.badArg(shmRecv, "%v", err)
	}
	return g.submitP2P(&shmOp{kind: shmRecv, buf: buf, root: src, tag: int64(tag)}, g.recvQs[src])
}

func (g *shmGroup) submitP2P(op *shmOp, q *shmP2PQueue) backend.Work {
	op.g = g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		op.complete(g.opError(op, backend.ErrClosed, nil, "submitted after Close", nil))
		return op
	}
	g.p2pIssued++
	op.seq = g.p2pIssued
	q.ops = append(q.ops, op)
	if !q.running {
		q.running = true
		g.p2pWG.Add(1)
		go g.p2pWorker(q)
	}
	return op
}

// p2pWorker drains q and exits when it is empty.
func (g *shmGroup) p2pWorker(q *shmP2PQueue) {
	defer g.p2pWG.Done()
	for {
		g.mu.Lock()
		if len(q.ops) == 0 {
			q.running = false
			g.mu.Unlock()
			return
		}
		op := q.ops[0]
		q.ops[0] = nil
		q.ops = q.ops[1:]
		g.mu.Unlock()
		op.deadline = time.Now().Add(g.timeout)
		var err error
		switch {
		case q.broken != nil:
			err = g.opError(op, backend.ErrPeerFailed, []int{op.root}, fmt.Sprintf("stream with rank %d unusable after an earlier failure", op.root), q.broken)
		case g.closing.Load():
			err = g.opError(op, backend.ErrClosed, nil, "group closed", nil)
		case op.kind == shmSend:
			err = g.send(op, q)
		default:
			err = g.recv(op, q)
		}
		if err != nil && !errors.Is(err, backend.ErrBadArgument) {
			q.broken = err
		}
		op.complete(err)
	}
}

// awaitWord waits until c, which rank k advances, reaches target.
func (g *shmGroup) awaitWord(op *shmOp, k int, c *atomic.Uint64, target uint64, what string) error {
	for i := 0; i < shmSpinIters; i++ {
		if c.Load() >= target {
			return nil
		}
	}
	return g.awaitSlow(op, k, c, target, what)
}

func (g *shmGroup) send(op *shmOp, q *shmP2PQueue) error {
	dst := op.root
	ring := g.seg.ring(g.rank, dst)
	written := g.seg.p2pCtl(g.rank, dst, shmP2PWritten)
	consumed := g.seg.p2pCtl(g.rank, dst, shmP2PConsumed)
	R := uint64(len(ring))
	put := func(data []byte) error {
		for len(data) > 0 {
			if q.pos-consumed.Load() == R {
				if err := g.awaitWord(op, dst, consumed, q.pos-R+1, "read our messages up to byte"); err != nil {
					return err
				}
			}
			free := R - (q.pos - consumed.Load())
			at := q.pos % R
			n := min(free, uint64(len(data)), R-at)
			copy(ring[at:at+n], data[:n])
			data = data[n:]
			q.pos += n
			written.Store(q.pos) // publish as we go: the receiver streams behind us
		}
		return nil
	}
	var hdr [shmHdrBytes]byte
	binary.LittleEndian.PutUint64(hdr[0:], uint64(op.tag))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(op.buf.Bytes)))
	if err := put(hdr[:]); err != nil {
		return err
	}
	if err := put(op.buf.Bytes); err != nil {
		return err
	}
	var pad [8]byte
	return put(pad[:shmPad(len(op.buf.Bytes))])
}

func shmPad(n int) int { return (8 - n%8) % 8 }

func (g *shmGroup) recv(op *shmOp, q *shmP2PQueue) error {
	src := op.root
	if msgs := q.stash[op.tag]; len(msgs) > 0 {
		m := msgs[0]
		if len(msgs) == 1 {
			delete(q.stash, op.tag)
		} else {
			q.stash[op.tag] = msgs[1:]
		}
		return g.deliver(op, m)
	}
	ring := g.seg.ring(src, g.rank)
	written := g.seg.p2pCtl(src, g.rank, shmP2PWritten)
	consumed := g.seg.p2pCtl(src, g.rank, shmP2PConsumed)
	R := uint64(len(ring))
	get := func(into []byte) error {
		for len(into) > 0 {
			if written.Load() == q.pos {
				if err := g.awaitWord(op, src, written, q.pos+1, "send us byte"); err != nil {
					return err
				}
			}
			avail := written.Load() - q.pos
			at := q.pos % R
			n := min(avail, uint64(len(into)), R-at)
			copy(into[:n], ring[at:at+n])
			into = into[n:]
			q.pos += n
			consumed.Store(q.pos)
		}
		return nil
	}
	var pad [8]byte
	for {
		var hdr [shmHdrBytes]byte
		if err := get(hdr[:]); err != nil {
			return err
		}
		tag := int64(binary.LittleEndian.Uint64(hdr[0:]))
		n := int(binary.LittleEndian.Uint64(hdr[8:]))
		if tag == op.tag && n == len(op.buf.Bytes) {
			if err := get(op.buf.Bytes); err != nil {
				return err
			}
			return get(pad[:shmPad(n)])
		}
		// Another tag (or a size mismatch): take the message aside whole,
		// so the stream stays in step.
		m := make([]byte, n)
		if err := get(m); err != nil {
			return err
		}
		if err := get(pad[:shmPad(n)]); err != nil {
			return err
		}
		if tag == op.tag {
			return g.deliver(op, m)
		}
		if q.stash == nil {
			q.stash = map[int64][][]byte{}
		}
		q.stash[tag] = append(q.stash[tag], m)
	}
}

// deliver copies a set-aside message into op's buffer.
func (g *shmGroup) deliver(op *shmOp, m []byte) error {
	if len(m) != len(op.buf.Bytes) {
		return g.opError(op, backend.ErrBadArgument, []int{op.root}, fmt.Sprintf("rank %d sent %d bytes with tag %d, the receive expects %d",
			op.root, len(m), op.tag, len(op.buf.Bytes)), nil)
	}
	copy(op.buf.Bytes, m)
	return nil
}
