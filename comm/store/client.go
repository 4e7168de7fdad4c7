package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"net"
	"sync"
	"time"
)

// storeClient is a TCP connection to a Server. Requests carry ids, so
// concurrent callers share the connection: a blocked get does not hold up a set.
type storeClient struct {
	conn    net.Conn
	addr    string
	timeout time.Duration

	wmu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan storeResponse
	nextID  uint64
	err     error // why the connection ended; set once
	done    chan struct{}
}

// Dial connects to the store at addr, retrying while the server is not
// up yet (the hosting rank may start later) until ctx ends or the store
// timeout passes. A refused token is not retried.
func Dial(ctx context.Context, addr string, opts ...Option) (backend.Store, error) {
	cfg := newStoreConfig(opts)
	if err := auth.CheckToken(cfg.token); err != nil {
		return nil, fmt.Errorf("comm: store %s: %w", addr, err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	var last error
	for {
		conn, err := dialStoreOnce(ctx, addr, cfg)
		if err == nil {
			c := &storeClient{conn: conn, addr: addr, timeout: cfg.timeout,
				pending: map[uint64]chan storeResponse{}, done: make(chan struct{})}
			go c.readLoop()
			return c, nil
		}
		if errors.Is(err, backend.ErrAuth) {
			return nil, fmt.Errorf("comm: store %s: %w", addr, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: store %s not reachable: %v", backend.ErrTimeout, addr, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func dialStoreOnce(ctx context.Context, addr string, cfg storeConfig) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	dl, _ := ctx.Deadline()
	if err := auth.Client(conn, cfg.token, auth.PurposeStore, nil, dl); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// LocalAddr is the local end of the store connection: the address other
// nodes reach this one by, used to pick the peer listener's interface.
func (c *storeClient) LocalAddr() net.Addr { return c.conn.LocalAddr() }

func (c *storeClient) readLoop() {
	var buf []byte
	var err error
	for {
		var frame []byte
		frame, err = readStoreFrame(c.conn, buf)
		if err != nil {
			break
		}
		buf = frame
		var resp storeResponse
		resp, err = decodeStoreResponse(frame)
		if err != nil {
			break
		}
		resp.Value = append([]byte(nil), resp.Value...)
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: store %s: connection lost: %v", backend.ErrPeerFailed, c.addr, err)
	}
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
	c.conn.Close()
}

func (c *storeClient) call(ctx context.Context, req storeRequest) (storeResponse, error) {
	blocking := req.Op == opGet || req.Op == opWait
	wait := c.timeout
	if blocking {
		req.Timeout = effectiveTimeout(ctx, c.timeout)
		wait = req.Timeout
	}
	ch := make(chan storeResponse, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return storeResponse{}, err
	}
	c.nextID++
	req.ID = c.nextID
	c.pending[req.ID] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, req.ID)
		}
		c.mu.Unlock()
	}
	b := req.encode(nil)
	c.wmu.Lock()
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		forget()
		c.conn.Close()
		return storeResponse{}, fmt.Errorf("%w: store %s: %v", backend.ErrPeerFailed, c.addr, err)
	}
	// The server answers a blocking request itself at its timeout; the grace
	// covers a server that died without closing the connection.
	timer := time.NewTimer(wait + 5*time.Second)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		forget()
		return storeResponse{}, ctx.Err()
	case <-timer.C:
		forget()
		return storeResponse{}, fmt.Errorf("%w: store %s did not answer %s within %v", backend.ErrTimeout, c.addr, req.Op, wait)
	case <-c.done:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return storeResponse{}, err
	}
}

func (c *storeClient) do(ctx context.Context, req storeRequest) (storeResponse, error) {
	return storeDo(ctx, c.call, req, " "+c.addr)
}

func (c *storeClient) Set(ctx context.Context, key string, value []byte) error {
	_, err := c.do(ctx, storeRequest{Op: opSet, Keys: []string{key}, Value: value})
	return err
}

func (c *storeClient) Get(ctx context.Context, key string) ([]byte, error) {
	r, err := c.do(ctx, storeRequest{Op: opGet, Keys: []string{key}})
	return r.Value, err
}

func (c *storeClient) Add(ctx context.Context, key string, delta int64) (int64, error) {
	r, err := c.do(ctx, storeRequest{Op: opAdd, Keys: []string{key}, Delta: delta})
	return r.Int, err
}

func (c *storeClient) Wait(ctx context.Context, keys ...string) error {
	_, err := c.do(ctx, storeRequest{Op: opWait, Keys: keys})
	return err
}

func (c *storeClient) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	r, err := c.do(ctx, storeRequest{Op: opCompareSet, Keys: []string{key}, Expected: expected, Value: desired})
	return r.Value, err
}

func (c *storeClient) Delete(ctx context.Context, key string) (bool, error) {
	r, err := c.do(ctx, storeRequest{Op: opDelete, Keys: []string{key}})
	return r.Int == 1, err
}

func (c *storeClient) NumKeys(ctx context.Context) (int64, error) {
	r, err := c.do(ctx, storeRequest{Op: opNumKeys})
	return r.Int, err
}

func (c *storeClient) Close() error {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: store client closed", backend.ErrClosed)
	}
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
