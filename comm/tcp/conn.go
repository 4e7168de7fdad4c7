package tcp

import (
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// xfer is one frame to send or one posted receive. Its completion (or
// failure) is signalled on events exactly once.
type xfer struct {
	key    frameKey
	peer   int
	buf    []byte // receive destination, or send payload
	events chan<- *xfer
	err    error
	done   bool // set by the consumer once it has taken the event
	send   bool
	op     *tcpOp // the worker op it belongs to (nil for point-to-point)
	// then, if set, runs on the worker once the xfer has succeeded (see ring).
	then func()
	// direct allows a small send to be written on the op's goroutine.
	direct bool
	// rest is what a direct write left for the writer goroutine.
	rest []byte
	// hdr holds the encoded header, descriptor included (hdrLen bytes).
	hdr    [frameHeaderLen + descLen]byte
	hdrLen int
	// quiet receives are read by the collective itself (see readInline),
	// so posting one does not wake the reader goroutine.
	quiet   bool
	arrived atomic.Bool
}

func (x *xfer) finish(err error) {
	x.err = err
	x.arrived.Store(true)
	x.events <- x
}

// maxUnexpected bounds what a peer may send ahead of this rank's posts.
const maxUnexpected = 1 << 30

// peerConn is the connection to one peer. A reader goroutine matches
// incoming frames with posted receives and reads payloads straight into
// their destination; frames that arrive before their receive is posted are
// kept until it is. A writer goroutine sends queued frames in order, so the
// owning collective never blocks on a write and both directions run at once.
type peerConn struct {
	g    *tcpGroup
	rank int
	conn net.Conn

	mu         sync.Mutex
	posted     map[frameKey]*xfer
	unexpected map[frameKey][]byte
	unexpBytes int
	gone       error // the peer left; receives it cannot satisfy fail with this
	demand     int   // posted receives that the reader goroutine must serve
	// early holds descriptors of collectives this rank has not started
	// yet, by seq, until it starts them (see checkDesc).
	early map[uint64]opDesc

	// The read side (read.go). Whoever holds rtok may read: the
	// reader goroutine, or a collective reading its own small reply.
	rtok     chan struct{}
	fr       *frameReader
	rc       syscall.RawConn
	sawBye   bool
	readEnd  bool          // the read side has failed or ended
	inlineIO atomic.Bool   // an op reads or writes on its own goroutine
	cut      atomic.Bool   // a timeout interrupted inline I/O: the stream may be cut mid-frame
	demandCh chan struct{} // wakes the reader goroutine
	stop     chan struct{} // closed at teardown

	wmu       sync.Mutex
	wcond     *sync.Cond
	wq        []*xfer // data frames, in order
	wctl      []*xfer // control frames, sent before queued data
	wbusy     bool    // the writer goroutine is writing a batch
	direct    bool    // a caller is writing a small frame itself (see send)
	directBuf []byte  // frame staging of direct writes
	// descSeq is the last collective whose descriptor went to this peer;
	// only the op's goroutine touches it (collectives run one at a time).
	descSeq uint64
	wclosed bool
	werr    error

	readerDone chan struct{}
	writerDone chan struct{}
}

func newPeerConn(g *tcpGroup, rank int, conn net.Conn) *peerConn {
	pc := &peerConn{
		g: g, rank: rank, conn: conn,
		posted:     map[frameKey]*xfer{},
		unexpected: map[frameKey][]byte{},
		rtok:       make(chan struct{}, 1),
		fr:         newFrameReader(conn, 64<<10),
		demandCh:   make(chan struct{}, 1),
		stop:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	pc.rtok <- struct{}{}
	if sc, ok := conn.(syscall.Conn); ok {
		pc.rc, _ = sc.SyscallConn()
	}
	pc.wcond = sync.NewCond(&pc.wmu)
	return pc
}

func (pc *peerConn) start() {
	go pc.readLoop()
	go pc.writeLoop()
}

// post registers a receive, or completes it at once from a frame that
// already arrived.
func (pc *peerConn) post(x *xfer) {
	pc.mu.Lock()
	if b, ok := pc.unexpected[x.key]; ok {
		delete(pc.unexpected, x.key)
		pc.unexpBytes -= len(b)
		pc.mu.Unlock()
		if len(b) != len(x.buf) {
			x.finish(pc.sizeMismatch(x.key, len(b), len(x.buf)))
			return
		}
		copy(x.buf, b)
		x.finish(nil)
		return
	}
	if pc.gone != nil {
		pc.mu.Unlock()
		x.finish(pc.gone)
		return
	}
	if _, dup := pc.posted[x.key]; dup {
		pc.mu.Unlock()
		x.finish(fmt.Errorf("%w: receive posted twice for %v", backend.ErrBadArgument, x.key))
		return
	}
	pc.posted[x.key] = x
	if !x.quiet {
		pc.demand++
	}
	pc.mu.Unlock()
	if !x.quiet {
		select {
		case pc.demandCh <- struct{}{}:
		default:
		}
	}
}

// promote makes a posted quiet receive one the reader goroutine serves.
func (pc *peerConn) promote(x *xfer) {
	pc.mu.Lock()
	if !x.quiet || pc.posted[x.key] != x {
		pc.mu.Unlock()
		return
	}
	x.quiet = false
	pc.demand++
	pc.mu.Unlock()
	select {
	case pc.demandCh <- struct{}{}:
	default:
	}
}

// take removes and returns the receive posted under k; pc.mu held.
func (pc *peerConn) take(k frameKey) *xfer {
	x := pc.posted[k]
	if x != nil {
		delete(pc.posted, k)
		if !x.quiet {
			pc.demand--
		}
	}
	return x
}

// unpost withdraws a receive that will not be waited for any more.
func (pc *peerConn) unpost(k frameKey) {
	pc.mu.Lock()
	pc.take(k)
	pc.mu.Unlock()
}

func (pc *peerConn) sizeMismatch(k frameKey, got, want int) error {
	return &peerFault{kind: backend.ErrBadArgument, peers: []int{pc.rank},
		detail: fmt.Sprintf("rank %d sent %d bytes where this rank expects %d (%v frame, seq %d, step %d, piece %d): "+
			"the ranks disagree on the op's size or order (GODDP_DEBUG_COLLECTIVES=1 checks every op)",
			pc.rank, got, want, k.kind, k.seq, k.step, k.aux)}
}

// directWriteMax is the largest frame a collective writes itself, when the
// writer is idle, instead of waking the writer goroutine: a goroutine
// handoff costs more than such a write.
const directWriteMax = 64 << 10

// send queues a frame, or writes a small one at once (see writeDirect). The
// first data frame of a collective to this peer carries its descriptor.
func (pc *peerConn) send(x *xfer, control bool) {
	h := frameHeader{Kind: x.key.kind, Seq: x.key.seq, Step: x.key.step, Aux: x.key.aux, Length: uint32(len(x.buf))}
	if x.op != nil && h.Kind == frameData && pc.descSeq != h.Seq {
		pc.descSeq = h.Seq
		h.HasDesc, h.Desc = true, x.op.desc
	}
	h.encode(x.hdr[:])
	x.hdrLen = h.wireLen()
	pc.wmu.Lock()
	if pc.wclosed {
		err := pc.werr
		pc.wmu.Unlock()
		if x.events != nil {
			x.finish(err)
		}
		return
	}
	if !control && x.direct && len(x.buf) <= directWriteMax && pc.rc != nil &&
		!pc.wbusy && !pc.direct && len(pc.wq) == 0 && len(pc.wctl) == 0 {
		pc.direct = true
		pc.wmu.Unlock()
		pc.writeDirect(x)
		return
	}
	pc.enqueue(x, control)
}

// enqueue hands x to the writer goroutine; pc.wmu held, and released.
func (pc *peerConn) enqueue(x *xfer, control bool) {
	if control {
		pc.wctl = append(pc.wctl, x)
	} else {
		pc.wq = append(pc.wq, x)
	}
	pc.wmu.Unlock()
	pc.wcond.Signal()
}

// writeDirect writes x on the caller's goroutine without ever blocking:
// one non-blocking write of the whole frame, and whatever the socket did
// not take goes to the writer goroutine. A blocking write here could
// deadlock two ranks that both write more than their socket buffers hold
// while neither reads. pc.direct is set.
func (pc *peerConn) writeDirect(x *xfer) {
	frame := append(append(pc.directBuf[:0], x.hdr[:x.hdrLen]...), x.buf...)
	pc.directBuf = frame
	var n int
	var werr error
	err := pc.rc.Write(func(fd uintptr) bool {
		for n < len(frame) {
			k, err := syscall.Write(int(fd), frame[n:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				if err != syscall.EAGAIN {
					werr = err
				}
				break
			}
			n += k
		}
		return true // never wait for writability here
	})
	if err == nil {
		err = werr
	}
	pc.wmu.Lock()
	pc.direct = false
	if err == nil && n < len(frame) {
		// The rest waits for the writer; directBuf is not reused before it
		// is out, since direct writes need an idle writer.
		x.rest = frame[n:]
		pc.enqueue(x, false)
		return
	}
	more := len(pc.wq) > 0 || len(pc.wctl) > 0 || pc.wclosed
	pc.wmu.Unlock()
	if more {
		pc.wcond.Broadcast()
	}
	if err != nil {
		err = pc.g.connFailed(pc, err, "write")
		pc.closeWriter(err)
	}
	x.finish(err)
}

// idle reports whether the writer has nothing queued or in progress.
func (pc *peerConn) idle() bool {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	return len(pc.wq) == 0 && len(pc.wctl) == 0 && !pc.wbusy && !pc.direct
}

// closeWriter stops the writer; queued frames fail with err.
func (pc *peerConn) closeWriter(err error) {
	pc.wmu.Lock()
	if !pc.wclosed {
		pc.wclosed = true
		pc.werr = err
	}
	pc.wmu.Unlock()
	pc.wcond.Broadcast()
}

const (
	maxWriteBatch = 64
)

func (pc *peerConn) writeLoop() {
	defer close(pc.writerDone)
	var batch []*xfer
	var bufs net.Buffers
	for {
		pc.wmu.Lock()
		pc.wbusy = false
		for (len(pc.wq) == 0 && len(pc.wctl) == 0 || pc.direct) && !pc.wclosed {
			pc.wcond.Wait()
		}
		if pc.wclosed {
			q := append(pc.wctl, pc.wq...)
			pc.wq, pc.wctl = nil, nil
			err := pc.werr
			pc.wmu.Unlock()
			for _, x := range q {
				if x.events != nil {
					x.finish(err)
				}
			}
			return
		}
		// Control frames first, then data in order, in one writev.
		batch = append(batch[:0], pc.wctl...)
		pc.wctl = pc.wctl[:0]
		n, size := 0, 0
		for n < len(pc.wq) && n < maxWriteBatch && (n == 0 || size+len(pc.wq[n].buf) <= pc.g.writeBatch) {
			size += len(pc.wq[n].buf)
			n++
		}
		batch = append(batch, pc.wq[:n]...)
		pc.wq = pc.wq[n:]
		if len(pc.wq) == 0 {
			pc.wq = nil
		}
		pc.wbusy = true
		pc.wmu.Unlock()

		bufs = bufs[:0]
		for _, x := range batch {
			if x.rest != nil {
				bufs = append(bufs, x.rest) // the tail of a direct write
				continue
			}
			bufs = append(bufs, x.hdr[:x.hdrLen])
			if len(x.buf) > 0 {
				bufs = append(bufs, x.buf)
			}
		}
		b := bufs
		_, err := b.WriteTo(pc.conn)
		if err != nil {
			err = pc.g.connFailed(pc, err, "write")
		}
		for _, x := range batch {
			if x.events != nil {
				x.finish(err)
			}
		}
		clear(batch)
		clear(bufs)
		if err != nil {
			pc.closeWriter(err)
		}
	}
}

// deliver reads one data frame's payload into its posted receive, or into
// a new buffer kept until the receive is posted.
func (pc *peerConn) deliver(fr *frameReader, h *frameHeader) error {
	key := h.key()
	n := int(h.Length)
	pc.mu.Lock()
	x := pc.take(key)
	pc.mu.Unlock()
	if x != nil {
		if n != len(x.buf) {
			err := pc.sizeMismatch(key, n, len(x.buf))
			x.finish(err)
			return err
		}
		if err := fr.readFull(x.buf); err != nil {
			err = noEOF(err)
			x.finish(err)
			return err
		}
		x.finish(nil)
		return nil
	}
	buf := make([]byte, n)
	if err := fr.readFull(buf); err != nil {
		return noEOF(err)
	}
	pc.mu.Lock()
	if x = pc.take(key); x != nil {
		// Posted while we were reading.
		pc.mu.Unlock()
		if n != len(x.buf) {
			err := pc.sizeMismatch(key, n, len(x.buf))
			x.finish(err)
			return err
		}
		copy(x.buf, buf)
		x.finish(nil)
		return nil
	}
	if _, dup := pc.unexpected[key]; dup {
		pc.mu.Unlock()
		return &peerFault{kind: backend.ErrPeerFailed, peers: []int{pc.rank},
			detail: fmt.Sprintf("rank %d sent a duplicate %v frame (seq %d, step %d, piece %d)", pc.rank, key.kind, key.seq, key.step, key.aux)}
	}
	pc.unexpected[key] = buf
	pc.unexpBytes += n
	over := pc.unexpBytes > maxUnexpected
	pc.mu.Unlock()
	if over {
		return &peerFault{kind: backend.ErrPeerFailed, peers: []int{pc.rank},
			detail: fmt.Sprintf("rank %d ran more than %d MiB ahead of this rank (mismatched ops?)", pc.rank, maxUnexpected>>20)}
	}
	return nil
}

// readFailed handles the end of the read side. A peer that said bye is
// merely gone: receives it can no longer satisfy fail, the group lives on.
// Anything else (a crash, a reset, garbage) fails the whole group.
func (pc *peerConn) readFailed(err error) {
	pc.readEnd = true
	if pc.sawBye && errors.Is(err, io.EOF) {
		pc.markGone(&peerFault{kind: backend.ErrPeerFailed, peers: []int{pc.rank},
			detail: fmt.Sprintf("rank %d closed its process group", pc.rank)})
		return
	}
	err = pc.g.connFailed(pc, err, "read")
	pc.markGone(err)
}

// markGone fails every receive posted on this peer, and later ones.
func (pc *peerConn) markGone(err error) {
	pc.mu.Lock()
	if pc.gone == nil {
		pc.gone = err
	}
	posted := pc.posted
	pc.posted = map[frameKey]*xfer{}
	pc.demand = 0
	pc.mu.Unlock()
	for _, x := range posted {
		x.finish(err)
	}
}

// describeConnErr words a connection error for humans.
func describeConnErr(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed (EOF): the peer process exited or was killed, or the connection was cut"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset: the peer process exited or was killed, or the connection was cut"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe: the peer process exited or was killed, or the connection was cut"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "a write stayed blocked until the op's deadline: the peer stopped reading"
	case errors.Is(err, errFrame):
		return "sent a malformed frame (" + err.Error() + ")"
	}
	return err.Error()
}
