package trainer

import (
	"net"
	"sync"
	"sync/atomic"
)

// limitListener hands out at most cap(slots) connections at a time and
// closes each one beyond that as soon as it is accepted, instead of
// queueing it (x/net/netutil's LimitListener waits for a slot, leaving
// the excess in the kernel's backlog): the page then holds a bounded
// number of file descriptors however many clients arrive, and the
// training process keeps the rest of its file limit for checkpoints and
// its process group (issue 43: 19,995 idle page connections left rank 0
// none for its next checkpoint).
type limitListener struct {
	net.Listener
	slots   chan struct{}
	refused atomic.Int64 // connections closed at once, for tests and logs
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

// Accept returns the next connection that finds a free slot.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			c.Close()
			l.refused.Add(1)
		}
	}
}

// limitConn gives its slot back when it is first closed.
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// CloseWrite half-closes a TCP connection: net/http looks for it (by type
// assertion, not by unwrapping) to let an error answer reach the client
// before the connection closes.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
