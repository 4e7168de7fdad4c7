package comm

import (
	"io"
	"net"
	"syscall"
	"time"
)

// spinReader reads a TCP connection, spinning on non-blocking reads for a
// short while before parking in the netpoller. It is off unless
// GODDP_TCP_SPIN_US is set: on a machine with more ranks than idle cores
// the spinning reader takes CPU from the peer it waits for. A small collective's reply
// usually arrives within microseconds; catching it without a park/wake
// round trip through the scheduler is what lets a small all-reduce keep up
// with MPI's busy-polling progress engine. The spin only follows a small
// read (latency-bound traffic), so bulk transfers never burn CPU on it.
type spinReader struct {
	conn  net.Conn
	rc    syscall.RawConn
	spin  time.Duration
	armed bool // the last read was small
}

// smallRead is the read size after which the next read spins.
const smallRead = 64 << 10

func newSpinReader(c net.Conn, spin time.Duration) io.Reader {
	sc, ok := c.(syscall.Conn)
	if !ok || spin <= 0 {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &spinReader{conn: c, rc: rc, spin: spin}
}

func (s *spinReader) Read(p []byte) (int, error) {
	if !s.armed || len(p) == 0 {
		n, err := s.conn.Read(p)
		s.armed = n > 0 && n < smallRead
		return n, err
	}
	var n int
	var rerr error
	var until time.Time
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), p)
			switch {
			case rerr == syscall.EINTR:
				continue
			case rerr == syscall.EAGAIN:
				if until.IsZero() {
					until = time.Now().Add(s.spin)
				} else if time.Now().After(until) {
					s.armed = false
					return false // park until readable
				}
				continue
			}
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	s.armed = n < smallRead
	return n, nil
}
