package tcp

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The read side of a peer connection. Whoever holds the read token reads
// frames and dispatches them: payloads to their posted receives (or kept
// until posted), control frames to the group.
//
// Two parties read. A collective waiting for a small reply reads it
// itself (readInline): the reply then costs one wakeup, its own, instead
// of waking a reader goroutine that hands over through a channel, which is
// what makes small all-reduces cheap. The reader goroutine reads whenever
// receives that nobody else will read are posted (pipelined large
// collectives, point-to-point) and otherwise polls the idle connection
// every idlePoll, so a peer's death, abort, goodbye or progress question is
// still noticed between collectives.

// idlePoll is how often an idle connection is checked for frames.
const idlePoll = 20 * time.Millisecond

// errInlineDeadline is an inline read that reached the op's deadline.
var errInlineDeadline = errors.New("comm: inline read deadline")

func (pc *peerConn) readLoop() {
	defer close(pc.readerDone)
	tick := time.NewTicker(idlePoll)
	defer tick.Stop()
	for {
		select {
		case <-pc.stop:
			return
		case <-pc.demandCh:
		case <-tick.C:
		}
		if !pc.pump() {
			return
		}
	}
}

// pump reads frames while receives wait on the reader goroutine or bytes
// wait in the socket; false once the read side has ended.
func (pc *peerConn) pump() bool {
	for {
		pc.mu.Lock()
		demand := pc.demand > 0
		pc.mu.Unlock()
		if demand {
			select {
			case <-pc.rtok:
			case <-pc.stop:
				return false
			}
		} else {
			// Idle: look only if nobody else is reading.
			select {
			case <-pc.rtok:
			default:
				return true
			}
			if !pc.readEnd && !pc.bytesWaiting() {
				pc.rtok <- struct{}{}
				return true
			}
		}
		ok := !pc.readEnd
		if ok {
			if err := pc.readFrame(); err != nil {
				pc.readFailed(err)
				ok = false
			}
		}
		pc.rtok <- struct{}{}
		if !ok {
			return false
		}
	}
}

// bytesWaiting peeks, without blocking, whether a frame (or EOF) has
// arrived; the read token is held.
func (pc *peerConn) bytesWaiting() bool {
	if pc.fr.n > pc.fr.i || pc.rc == nil {
		return true
	}
	var one [1]byte
	var n int
	var perr error
	err := pc.rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	if err != nil {
		return true // let the read report it
	}
	return n > 0 || perr == nil || !errors.Is(perr, syscall.EAGAIN)
}

// readInline reads frames on the caller's goroutine until x has arrived.
// It reports false when another party holds the read token (the caller
// then waits for x's completion event as usual). The group's watchdog
// interrupts it at the op's deadline.
func (pc *peerConn) readInline(x *xfer, expired <-chan struct{}) (bool, error) {
	select {
	case <-pc.rtok:
	default:
		return false, nil
	}
	defer func() { pc.rtok <- struct{}{} }()
	if pc.readEnd {
		return false, nil
	}
	pc.inlineIO.Store(true)
	defer pc.inlineIO.Store(false)
	select {
	case <-expired: // expired before the flag was up: the watchdog missed us
		return true, errInlineDeadline
	default:
	}
	if spin := pc.g.spin; spin > 0 && pc.fr.n == pc.fr.i && pc.rc != nil {
		pc.spinFill(spin)
	}
	for !x.arrived.Load() {
		if err := pc.readFrame(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The stream may be cut mid-frame; the timeout fails the group.
				pc.readEnd = true
				return true, errInlineDeadline
			}
			pc.readFailed(err) // fails x, among others
			return true, nil
		}
	}
	return true, nil
}

// readFrame reads and dispatches one frame; the read token is held.
func (pc *peerConn) readFrame() error {
	fr := pc.fr
	h, err := fr.readHeader()
	if err != nil {
		return err
	}
	return pc.dispatch(h)
}

// dispatch reads the payload of the frame whose header h was just read and
// routes it; the read token is held.
func (pc *peerConn) dispatch(h frameHeader) error {
	fr := pc.fr
	switch h.Kind {
	case frameData, frameP2P, frameCheck:
		if h.HasDesc {
			if err := pc.checkDesc(h.Seq, h.Desc); err != nil {
				return err
			}
		}
		return pc.deliver(fr, &h)
	case frameProgressReq:
		pc.g.answerProgress(pc, h.Seq)
	case frameProgressReply, frameAbort:
		payload := make([]byte, h.Length)
		if err := fr.readFull(payload); err != nil {
			return noEOF(err)
		}
		if h.Kind == frameAbort {
			pc.g.abort(decodeAbort(pc.rank, payload))
		} else {
			pc.g.progressReply(pc.rank, h.Seq, payload)
		}
	case frameBye:
		pc.sawBye = true
		return fr.discard(int(h.Length))
	default:
		return fmt.Errorf("%w: unexpected %v frame", errFrame, h.Kind)
	}
	return nil
}

// spinFill polls the socket without blocking for up to d, filling the
// frame reader's buffer when bytes arrive: a reply due within
// microseconds is then taken without a park and wakeup. Off by default
// (GODDP_TCP_SPIN_US): with fewer idle cores than ranks, spinning takes the
// CPU from the peer it waits for.
func (pc *peerConn) spinFill(d time.Duration) {
	fr := pc.fr
	until := time.Now().Add(d)
	pc.rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), fr.buf)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				if time.Now().Before(until) {
					continue
				}
			case err == nil && n > 0:
				fr.i, fr.n = 0, n
			}
			// No data yet, an error or EOF: the normal read sees to it.
			return true
		}
	})
}
