package c10d

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// Defaults.
const (
	// DefaultTimeout is torch's store timeout (and goddp's).
	DefaultTimeout = 10 * time.Minute
	// handshakeTimeout bounds the wait for a handshake answer: a torch
	// store answers in a round trip, so silence this long means something
	// else holds the port.
	handshakeTimeout = 10 * time.Second
	// maxIdle is how many idle connections the pool keeps; the rendezvous
	// rarely has more calls in flight at once.
	maxIdle = 4
	// maxPoll is the longest a wait goes without checking its keys.
	maxPoll = 250 * time.Millisecond
	// legacyMaxValue bounds answers from a legacy server (it has no bound
	// of its own); goddp's stores refuse larger values too.
	legacyMaxValue = 64 << 20
)

// Option configures Dial.
type Option func(*options)

type options struct {
	timeout time.Duration
}

// WithTimeout bounds each call that has no earlier ctx deadline: a get or
// wait gives up when its keys have not appeared by then. Default
// DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Client is a connection (pool) to a torch TCPStore. It implements
// backend.Store; see the package doc for the semantics.
type Client struct {
	addr    string
	d       *dialect
	timeout time.Duration
	local   net.Addr

	mu     sync.Mutex
	idle   []*conn
	busy   map[*conn]bool
	closed bool
}

var _ backend.Store = (*Client)(nil)

// conn is one connection of the pool.
type conn struct {
	nc net.Conn
	r  *bufio.Reader
}

func (c *conn) close() { c.nc.Close() }

// Dial connects to the torch TCPStore at addr ("host:port"), finding which
// dialect it speaks. It retries while nothing listens there, until ctx
// ends or the timeout passes, and fails at once, wrapping ErrProtocol,
// when something else answers.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout}
	for _, f := range opts {
		f(&o)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%w: c10d store timeout %v", backend.ErrBadArgument, o.timeout)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	d, local, err := detect(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &Client{addr: addr, d: d, timeout: o.timeout, local: local, busy: map[*conn]bool{}}, nil
}

// Protocol names the dialect the server speaks.
func (cl *Client) Protocol() string { return cl.d.name }

// LocalAddr is the local end of the first connection: the interface other
// nodes reach this one by (comm picks its peer listener's with it).
func (cl *Client) LocalAddr() net.Addr { return cl.local }

// dialRetry connects to addr, retrying refused connections with backoff
// until ctx ends.
func dialRetry(ctx context.Context, addr string) (*conn, error) {
	backoff := 10 * time.Millisecond
	var last error
	for {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
				_ = tc.SetKeepAlive(true)
			}
			return &conn{nc: nc, r: bufio.NewReader(nc)}, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: c10d store %s not reachable: %v", backend.ErrTimeout, addr, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// acquire takes an idle connection or opens one.
func (cl *Client) acquire(ctx context.Context) (*conn, error) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, fmt.Errorf("%w: c10d store %s: client closed", backend.ErrClosed, cl.addr)
	}
	if n := len(cl.idle); n > 0 {
		c := cl.idle[n-1]
		cl.idle = cl.idle[:n-1]
		cl.busy[c] = true
		cl.mu.Unlock()
		return c, nil
	}
	cl.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cl.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: c10d store %s: %v", backend.ErrPeerFailed, cl.addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetKeepAlive(true)
	}
	c := &conn{nc: nc, r: bufio.NewReader(nc)}
	if cl.d.validated {
		// No answer comes to VALIDATE; the request that follows shows
		// whether it was taken.
		nc.SetWriteDeadline(time.Now().Add(cl.timeout))
		if _, err := nc.Write(validation()); err != nil {
			nc.Close()
			return nil, fmt.Errorf("%w: c10d store %s: %v", backend.ErrPeerFailed, cl.addr, err)
		}
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		nc.Close()
		return nil, fmt.Errorf("%w: c10d store %s: client closed", backend.ErrClosed, cl.addr)
	}
	cl.busy[c] = true
	return c, nil
}

// release returns c to the pool after a call that read its whole answer;
// after any other end the server may still answer on it, so it is closed.
func (cl *Client) release(c *conn, clean bool) {
	cl.mu.Lock()
	delete(cl.busy, c)
	if clean && !cl.closed && len(cl.idle) < maxIdle && c.r.Buffered() == 0 {
		cl.idle = append(cl.idle, c)
		cl.mu.Unlock()
		return
	}
	cl.mu.Unlock()
	c.close()
}

// call runs one request on a connection of its own: write req, then read
// the answer with rd.
func (cl *Client) call(ctx context.Context, what string, keys []string, req request, rd func(*conn) error) error {
	if err := cl.checkSizes(keys, req); err != nil {
		return err
	}
	return cl.exchange(ctx, what, keys, func(c *conn, _ time.Time) (bool, error) {
		if _, err := c.nc.Write(req); err != nil {
			return false, err
		}
		return true, rd(c)
	})
}

// exchange runs fn on a connection of its own. The connection's deadline
// is the store timeout (or ctx's, when earlier), and a cancelled ctx
// interrupts it. fn reports whether the connection can be reused; it is
// not after an error, nor when the server may still answer on it.
func (cl *Client) exchange(ctx context.Context, what string, keys []string, fn func(c *conn, deadline time.Time) (reuse bool, err error)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := cl.acquire(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(cl.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Now()) })
	reuse, err := fn(c, deadline)
	interrupted := !stop()
	cl.release(c, reuse && err == nil && !interrupted)
	if err == nil {
		return nil
	}
	op := what
	if len(keys) > 0 {
		op += " " + keyList(keys)
	}
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("%w: c10d store %s: %s: nothing after %v: %w", backend.ErrTimeout, cl.addr, op, took, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("comm: c10d store %s: %s: %w", cl.addr, op, ctx.Err())
	case isTimeout(err):
		return fmt.Errorf("%w: c10d store %s: %s: nothing after %v", backend.ErrTimeout, cl.addr, op, took)
	case cl.isClosed():
		return fmt.Errorf("%w: c10d store %s: %s: client closed", backend.ErrClosed, cl.addr, op)
	case closedEarly(err):
		return fmt.Errorf("%w: c10d store %s: %s: the server closed the connection", backend.ErrPeerFailed, cl.addr, op)
	}
	return fmt.Errorf("%w: c10d store %s: %s: %v", backend.ErrPeerFailed, cl.addr, op, err)
}

// checkSizes refuses what a libuv server would drop the connection for.
func (cl *Client) checkSizes(keys []string, req request) error {
	if cl.d.maxKey > 0 {
		for _, k := range keys {
			if len(k)+1 > cl.d.maxKey {
				return fmt.Errorf("%w: c10d store %s: key of %d bytes exceeds torch's %d", backend.ErrBadArgument, cl.addr, len(k), cl.d.maxKey)
			}
		}
	}
	if cl.d.maxValue > 0 && len(req) > cl.d.maxValue {
		return fmt.Errorf("%w: c10d store %s: value of %d bytes exceeds torch's %d", backend.ErrBadArgument, cl.addr, len(req), cl.d.maxValue)
	}
	return nil
}

func (cl *Client) isClosed() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.closed
}

func (cl *Client) maxValue() int {
	if cl.d.maxValue > 0 {
		return cl.d.maxValue
	}
	return legacyMaxValue
}

// wire is the key as torch's TCPStore client sends it.
func wire(key string) string { return "/" + key }

func wireAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = wire(k)
	}
	return out
}

// Set stores value at key, and returns once the server has applied it.
func (cl *Client) Set(ctx context.Context, key string, value []byte) error {
	k := wire(key)
	req := request{}.op(cl.d.set).str(k).bytes(value).op(cl.d.check).keys([]string{k})
	return cl.call(ctx, "set", []string{key}, req, func(c *conn) error {
		return expectCheck(c)
	})
}

// Get waits until key exists and returns its value.
func (cl *Client) Get(ctx context.Context, key string) ([]byte, error) {
	if err := cl.Wait(ctx, key); err != nil {
		return nil, err
	}
	var v []byte
	err := cl.call(ctx, "get", []string{key}, request{}.op(cl.d.get).str(wire(key)), func(c *conn) error {
		var err error
		v, err = readVec(c.r, cl.maxValue())
		return err
	})
	return v, err
}

// Add adds delta to the decimal integer at key (created at 0) and returns
// the sum.
func (cl *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	var n int64
	err := cl.call(ctx, "add", []string{key}, request{}.op(cl.d.add).str(wire(key)).u64(uint64(delta)), func(c *conn) error {
		var err error
		n, err = readI64(c.r)
		return err
	})
	return n, err
}

// Wait blocks until every key exists.
//
// torch's servers, but for the libuv one, wake no waiter when compare_set
// creates a key (only set and add do), and goddp's rendezvous creates its
// keys with compare-set. So the wait also polls with CHECK, at growing
// intervals up to maxPoll: a key set is seen at once, a key compare-set
// within maxPoll.
func (cl *Client) Wait(ctx context.Context, keys ...string) error {
	wk := wireAll(keys)
	req := request{}.op(cl.d.wait).keys(wk)
	if err := cl.checkSizes(keys, req); err != nil {
		return err
	}
	if ready, err := cl.Check(ctx, keys...); err != nil || ready {
		return err
	}
	return cl.exchange(ctx, "wait for", keys, func(c *conn, deadline time.Time) (bool, error) {
		if _, err := c.nc.Write(req); err != nil {
			return false, err
		}
		for poll := 10 * time.Millisecond; ; poll = min(2*poll, maxPoll) {
			if ctx != nil && ctx.Err() != nil {
				return false, ctx.Err()
			}
			slice := time.Now().Add(poll)
			if slice.After(deadline) {
				slice = deadline
			}
			c.nc.SetReadDeadline(slice)
			b, err := c.r.ReadByte()
			switch {
			case err == nil && b != stopWaiting:
				return false, fmt.Errorf("wait answered %d, not STOP_WAITING", b)
			case err == nil:
				return true, nil
			case !isTimeout(err) || !time.Now().Before(deadline):
				return false, err
			}
			ready, err := cl.Check(ctx, keys...)
			if err != nil || ready {
				// The server may still answer the wait: drop the connection.
				return false, err
			}
		}
	})
}

// CompareSet sets key to desired if it holds expected (an empty expected
// matches a missing key) and returns what the key then holds, nil when it
// does not exist.
func (cl *Client) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	var v []byte
	req := request{}.op(cl.d.compareSet).str(wire(key)).bytes(expected).bytes(desired)
	err := cl.call(ctx, "compare-set", []string{key}, req, func(c *conn) error {
		var err error
		v, err = readVec(c.r, cl.maxValue())
		return err
	})
	if err != nil {
		return nil, err
	}
	// torch answers expected itself for a missing key; had the key held
	// expected, it would now hold (and answer) desired.
	if len(expected) > 0 && string(v) == string(expected) {
		return nil, nil
	}
	return v, nil
}

// Check reports whether every key exists, without waiting.
func (cl *Client) Check(ctx context.Context, keys ...string) (bool, error) {
	var ready bool
	err := cl.call(ctx, "check", keys, request{}.op(cl.d.check).keys(wireAll(keys)), func(c *conn) error {
		b, err := readU8(c.r)
		switch {
		case err != nil:
			return err
		case b != checkReady && b != checkNotReady:
			return fmt.Errorf("check answered %d", b)
		}
		ready = b == checkReady
		return nil
	})
	return ready, err
}

// Delete removes key and reports whether it existed.
func (cl *Client) Delete(ctx context.Context, key string) (bool, error) {
	var n int64
	err := cl.call(ctx, "delete", []string{key}, request{}.op(cl.d.del).str(wire(key)), func(c *conn) error {
		var err error
		n, err = readI64(c.r)
		return err
	})
	return n == 1, err
}

// NumKeys counts every key in the store (the agent's included).
func (cl *Client) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := cl.call(ctx, "num keys", nil, request{}.op(cl.d.numKeys), func(c *conn) error {
		var err error
		n, err = readI64(c.r)
		return err
	})
	return n, err
}

// Close closes every connection; calls in flight fail with ErrClosed.
func (cl *Client) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	conns := append([]*conn(nil), cl.idle...)
	for c := range cl.busy {
		conns = append(conns, c)
	}
	cl.idle = nil
	cl.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return nil
}

// expectCheck reads a CHECK answer.
func expectCheck(c *conn) error {
	b, err := readU8(c.r)
	if err == nil && b != checkReady && b != checkNotReady {
		err = fmt.Errorf("check answered %d", b)
	}
	return err
}

func keyList(keys []string) string {
	if len(keys) == 1 {
		return fmt.Sprintf("%q", keys[0])
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return "[" + strings.Join(q, " ") + "]"
}
