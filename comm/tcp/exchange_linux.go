//go:build linux

package tcp

import (
	"errors"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/reduce"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// exchangeFast runs a two-rank exchange (each rank sends buf to peer in np
// pieces, frames keyed (o.seq, step, piece), and reduces every piece of the
// peer's copy into buf as it lands) in a single-thread progress loop on the
// op's own goroutine: non-blocking writev of the outgoing frames and
// non-blocking reads of the incoming ones, interleaved, so both directions
// and the reductions overlap without any goroutine handoff. The frames are
// those of the queued path, so a peer that took the queued path (its writer
// was busy, say) interoperates.
//
// It reports false, having done nothing, when it cannot own the connection
// outright: another party holds the read token, the writer has work, or a
// frame of this exchange already arrived through the reader goroutine.
func (g *tcpGroup) exchangeFast(o *tcpOp, peer int, step uint32, buf backend.Buffer, scratch []byte, np int, op backend.ReduceOp) (bool, error) {
	pc := g.peers[peer]
	if pc.rc == nil {
		return false, nil
	}
	select {
	case <-pc.rtok:
	default:
		return false, nil
	}
	if pc.readEnd {
		pc.rtok <- struct{}{}
		return false, nil
	}
	pc.wmu.Lock()
	if pc.wclosed || pc.wbusy || pc.direct || len(pc.wq) > 0 || len(pc.wctl) > 0 {
		pc.wmu.Unlock()
		pc.rtok <- struct{}{}
		return false, nil
	}
	pc.direct = true // keeps the writer goroutine and direct writes off the socket
	pc.wmu.Unlock()
	// The write side goes back as soon as our frames are all out, while we
	// may still wait long for the peer's: control frames (a progress
	// question or answer, an abort) must not wait behind a late peer, or
	// the stall inspector would call a live rank "no answer".
	writeHeld := true
	releaseWrite := func() {
		if !writeHeld {
			return
		}
		writeHeld = false
		pc.wmu.Lock()
		pc.direct = false
		more := len(pc.wq) > 0 || len(pc.wctl) > 0 || pc.wclosed
		pc.wmu.Unlock()
		if more {
			pc.wcond.Broadcast()
		}
	}
	release := func() {
		releaseWrite()
		pc.rtok <- struct{}{}
	}
	pc.mu.Lock()
	early := pc.gone != nil
	for p := 0; p < np && !early && len(pc.unexpected) > 0; p++ {
		_, early = pc.unexpected[frameKey{frameData, o.seq, step, uint32(p)}]
	}
	pc.mu.Unlock()
	if early {
		release()
		return false, nil
	}
	pc.inlineIO.Store(true)
	defer pc.inlineIO.Store(false)
	defer release()
	select {
	case <-o.expired:
		return true, g.expiredFault(o)
	default:
	}
	err := pc.exchangeLoop(o, step, buf, scratch, np, op, releaseWrite)
	return true, err
}

// exchangeLoop runs the exchange; sent is called once every outgoing frame
// is out.
func (pc *peerConn) exchangeLoop(o *tcpOp, step uint32, buf backend.Buffer, scratch []byte, np int, op backend.ReduceOp, sent func()) error {
	g := pc.g
	es := buf.DType.Size()
	all := span{0, buf.Len()}
	// Incoming pieces land in scratch used as a ring of slots pieces: a
	// piece's slot is free again once it is reduced, and no payload is
	// read while every slot waits. A scratch as large as buf is the
	// one-slot-per-piece case.
	pieceMax := maxPieceBytes(buf.Len(), np, es)
	slots := max(1, len(scratch)/max(pieceMax, 1))
	slot := func(p int) []byte {
		a, b := piece(all, p, np, es)
		off := p % slots * pieceMax
		return scratch[off : off+b-a]
	}

	// The outgoing frames, as one iovec list.
	hdrs := make([]byte, np*frameHeaderLen)
	bufs := make([][]byte, 0, 2*np)
	sentEnd := make([]int, np) // stream offset at which piece p is out
	total := 0
	withDesc := pc.descSeq != o.seq // the first frame of o to this peer carries o's descriptor
	pc.descSeq = o.seq
	if withDesc {
		hdrs = make([]byte, np*frameHeaderLen+descLen)
	}
	off := 0
	for p := range np {
		a, b := piece(all, p, np, es)
		h := frameHeader{Kind: frameData, Seq: o.seq, Step: step, Aux: uint32(p), Length: uint32(b - a)}
		h.HasDesc, h.Desc = withDesc && p == 0, o.desc
		hb := hdrs[off : off+h.wireLen()]
		off += len(hb)
		h.encode(hb)
		bufs = append(bufs, hb)
		if b > a {
			bufs = append(bufs, buf.Bytes[a:b])
		}
		total += len(hb) + b - a
		sentEnd[p] = total
	}
	iov := make([]syscall.Iovec, len(bufs))
	for i, b := range bufs {
		iov[i].Base = &b[0]
		iov[i].SetLen(len(b))
	}
	wi, written := 0, 0
	// writev writes what the socket takes without blocking, at most limit
	// bytes when limit > 0; false on EAGAIN.
	var werr error
	writev := func(fd uintptr, limit int) bool {
		for wi < len(iov) && (limit <= 0 || written < limit) {
			cnt := min(len(iov)-wi, 1024)
			cut := -1 // iovec cut short for this call (bufs has it whole)
			if limit > 0 {
				// Cover at most limit-written bytes: a prefix of the
				// iovecs, the last one cut short.
				room, k := limit-written, 0
				for k < cnt && room > 0 {
					room -= len(bufs[wi+k])
					k++
				}
				cnt = k
				if room < 0 {
					cut = wi + cnt - 1
					iov[cut].SetLen(len(bufs[cut]) + room)
				}
			}
			n, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[wi])), uintptr(cnt))
			if cut >= 0 {
				iov[cut].SetLen(len(bufs[cut]))
			}
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				return false
			}
			if e != 0 {
				werr = e
				return true
			}
			k := int(n)
			written += k
			for k > 0 {
				if k >= len(bufs[wi]) {
					k -= len(bufs[wi])
					wi++
					continue
				}
				bufs[wi] = bufs[wi][k:]
				iov[wi].Base = &bufs[wi][0]
				iov[wi].SetLen(len(bufs[wi]))
				k = 0
			}
		}
		return true
	}

	// The read side: a header through the frame reader's buffer, a payload
	// of this exchange straight into scratch.
	fr := pc.fr
	got := 0       // received pieces, in order (one stream, sent in order)
	var dst []byte // payload being read, nil between frames
	var dgot int   // bytes of dst read
	reduced := 0   // pieces reduced into buf
	var rerr error // read error
	readSome := func(fd uintptr, b []byte) (int, bool) {
		for {
			n, err := syscall.Read(int(fd), b)
			if err == syscall.EINTR {
				continue
			}
			if err == syscall.EAGAIN {
				return 0, false
			}
			if err != nil {
				rerr = err
				return 0, true
			}
			if n == 0 {
				rerr = io.EOF
			}
			return n, true
		}
	}
	// readStep makes what read progress it can without blocking; ok=false
	// means it would block.
	var readStep func(fd uintptr) bool
	readStep = func(fd uintptr) bool {
		if dst != nil {
			n, ok := readSome(fd, dst[dgot:])
			if !ok || rerr != nil {
				return ok
			}
			dgot += n
			if dgot == len(dst) {
				dst = nil
				got++
			}
			return true
		}
		// Top the buffer up to a header (and a little read-ahead).
		if fr.i > 0 {
			fr.n = copy(fr.buf, fr.buf[fr.i:fr.n])
			fr.i = 0
		}
		n, ok := readSome(fd, fr.buf[fr.n:min(len(fr.buf), max(frameHeaderLen, readAhead))])
		fr.n += n
		return ok
	}
	for got < np || written < total {
		g.schedHint()
		// Parse every complete header that is buffered.
		for dst == nil && got < np && got-reduced < slots && fr.headerBuffered() {
			h, err := fr.readHeader()
			if err != nil {
				pc.readFailed(err)
				return pc.readErr()
			}
			want := frameKey{frameData, o.seq, step, uint32(got)}
			if h.key() != want {
				// Another frame (control, point-to-point) in between: the
				// usual dispatch reads it (blocking, as it is already in
				// flight as a whole).
				if err := pc.dispatch(h); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						pc.readEnd = true
						return g.expiredFault(o)
					}
					pc.readFailed(err)
					return pc.readErr()
				}
				continue
			}
			if h.HasDesc {
				if err := pc.checkDesc(h.Seq, h.Desc); err != nil {
					pc.readFailed(err)
					return pc.readErr()
				}
			}
			a, b := piece(all, got, np, es)
			if int(h.Length) != b-a {
				err := pc.sizeMismatch(want, int(h.Length), b-a)
				pc.readFailed(err)
				return pc.readErr()
			}
			dst = slot(got)
			dgot = copy(dst, fr.buf[fr.i:fr.n])
			fr.i += dgot
			if dgot == len(dst) {
				dst = nil
				got++
			}
		}
		// Reduce what has both arrived and gone out.
		for reduced < got && written >= sentEnd[reduced] {
			a, b := piece(all, reduced, np, es)
			reduce.Into(backend.Buffer{DType: buf.DType, Bytes: buf.Bytes[a:b]}, backend.Buffer{DType: buf.DType, Bytes: slot(reduced)}, op)
			reduced++
		}
		if got == np && written == total {
			break
		}
		progress := false
		var err error
		if written < total {
			w0 := written
			// One batch, then the read side gets its turn: alternating
			// keeps what each step touches (our piece, the socket's
			// buffers, the peer's piece) in cache.
			err = pc.rc.Write(func(fd uintptr) bool { writev(fd, written+exchangeBatchBytes); return true })
			if err == nil {
				err = werr
			}
			if err != nil {
				return pc.exchangeWriteErr(o, err)
			}
			progress = written > w0
			if written == total {
				sent()
			}
		}
		// Reading needs a free slot, or a payload already under way.
		canRead := got < np && (dst != nil || got-reduced < slots)
		if canRead {
			ok := false
			err = pc.rc.Read(func(fd uintptr) bool { ok = readStep(fd); return true })
			if err == nil {
				err = rerr
			}
			if err != nil {
				return pc.exchangeReadErr(o, err)
			}
			progress = progress || ok
		}
		if progress {
			continue
		}
		// Nothing moves: wait. While frames are due and a slot is free,
		// wait for them: our writes can only be stuck on a full peer, which
		// is then readable and reads, so two ranks cannot both wait here
		// for ever. Else wait until the socket takes more of ours (the peer
		// reads while it expects frames). With every slot full, our own
		// sends are what the oldest piece waits for; the peer reads them,
		// since it has received fewer of our pieces than it has sent us,
		// and so can reduce all it holds and free its slots.
		if canRead {
			if spin := g.spin; spin > 0 {
				// A core of our own: poll a while before parking, as
				// readInline does.
				until := time.Now().Add(spin)
				ok := false
				for !ok && rerr == nil && time.Now().Before(until) {
					err = pc.rc.Read(func(fd uintptr) bool { ok = readStep(fd); return true })
					if err != nil {
						break
					}
				}
				if err == nil {
					err = rerr
				}
				if err != nil {
					return pc.exchangeReadErr(o, err)
				}
				if ok {
					continue
				}
			}
			err = pc.rc.Read(readStep)
			if err == nil {
				err = rerr
			}
			if err != nil {
				return pc.exchangeReadErr(o, err)
			}
		} else {
			err = pc.rc.Write(func(fd uintptr) bool { return writev(fd, 0) })
			if err == nil {
				err = werr
			}
			if err != nil {
				return pc.exchangeWriteErr(o, err)
			}
			if written == total {
				sent()
			}
		}
	}
	for reduced < np {
		a, b := piece(all, reduced, np, es)
		reduce.Into(backend.Buffer{DType: buf.DType, Bytes: buf.Bytes[a:b]}, backend.Buffer{DType: buf.DType, Bytes: slot(reduced)}, op)
		reduced++
	}
	return nil
}

func (pc *peerConn) exchangeWriteErr(o *tcpOp, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		pc.closeWriter(err) // a frame may be cut: nothing more goes out
		return pc.g.expiredFault(o)
	}
	err = pc.g.connFailed(pc, err, "write")
	pc.closeWriter(err)
	return err
}

func (pc *peerConn) exchangeReadErr(o *tcpOp, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		pc.readEnd = true
		return pc.g.expiredFault(o)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // mid-exchange: the peer owes us frames
	}
	pc.readFailed(err)
	return pc.readErr()
}

// readErr is the error the read side ended with.
func (pc *peerConn) readErr() error {
	if c := pc.g.cause.Load(); c != nil {
		return c
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.gone != nil {
		return pc.gone
	}
	return io.ErrUnexpectedEOF
}
