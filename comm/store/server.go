package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Option configures Listen, Dial and NewFile.
type Option func(*storeConfig)

type storeConfig struct {
	token    string
	insecure bool
	timeout  time.Duration
	logf     func(format string, args ...any)
	limits   *Config // nil: ConfigFromEnv
}

func newStoreConfig(opts []Option) storeConfig {
	c := storeConfig{timeout: backend.DefaultTimeout, logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithToken sets the job token: clients must prove it (HMAC challenge) and
// the server must prove it back. Empty means no authentication.
func WithToken(token string) Option { return func(c *storeConfig) { c.token = token } }

// WithInsecure lets Listen bind an address that is not loopback with no
// token (GODDP_INSECURE=1); without it Listen refuses to.
func WithInsecure() Option { return func(c *storeConfig) { c.insecure = true } }

// WithConfig sets the server's limits; without it Listen reads them from
// the environment (ConfigFromEnv).
func WithConfig(limits Config) Option { return func(c *storeConfig) { c.limits = &limits } }

// WithTimeout bounds blocking gets and waits, and Dial's retries.
func WithTimeout(d time.Duration) Option {
	return func(c *storeConfig) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithLogger receives the server's diagnostics (refused connections,
// protocol errors); the default writes them to stderr. It never sees the token.
func WithLogger(logf func(format string, args ...any)) Option {
	return func(c *storeConfig) {
		if logf != nil {
			c.logf = logf
		}
	}
}

// Server is the TCP rendezvous store (torch's TCPStore master).
type Server struct {
	cfg    storeConfig
	limits Config // resolved
	ln     net.Listener
	state  *storeState
	done   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// handshaking holds the connections in the handshake, oldest first.
	handshaking []net.Conn
	evicted     int
}

// Listen starts a store server bound to exactly addr ("127.0.0.1:0"
// picks a free port; an explicit "0.0.0.0:port" is needed to listen on every
// interface). It refuses an address that is not loopback without a token
// of at least 16 bytes, unless WithInsecure.
func Listen(ctx context.Context, addr string, opts ...Option) (*Server, error) {
	cfg := newStoreConfig(opts)
	if err := auth.CheckListen(addr, cfg.token, cfg.insecure); err != nil {
		return nil, fmt.Errorf("comm: store: %w", err)
	}
	var limits Config
	if cfg.limits != nil {
		limits = *cfg.limits
		if err := limits.Validate(); err != nil {
			return nil, err
		}
	} else {
		var err error
		if limits, err = ConfigFromEnv(); err != nil {
			return nil, err
		}
	}
	limits = limits.resolve()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("comm: store: listen on %s: %w", addr, err)
	}
	s := &Server{
		cfg:    cfg,
		limits: limits,
		ln:     ln,
		state:  newStoreState(limits.MaxBytes, limits.MaxPendingBytes),
		done:   make(chan struct{}),
		conns:  map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the server listens on (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Client returns an in-process Store on this server, for the process that
// hosts it (no socket, same semantics). Closing it does not stop the server.
func (s *Server) Client() backend.Store {
	return &localStore{state: s.state, timeout: s.cfg.timeout, done: s.done}
}

// Clients is the number of connections the server holds open (the
// hosting process's own Client is not one).
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops the server and drops its clients; it waits for its goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// Out of file descriptors and the like: keep serving.
			s.cfg.logf("comm: store %s: accept: %v", s.Addr(), err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		if len(s.handshaking) >= s.limits.MaxHandshakes {
			// Evict the oldest: it has had the longest to answer.
			old := s.handshaking[0]
			s.handshaking = s.handshaking[1:]
			old.Close()
			if s.evicted++; s.evicted == 1 || s.evicted%1000 == 0 {
				s.cfg.logf("comm: store %s: more than %d connections in the handshake at once (a flood?); "+
					"dropped the oldest, %d so far (GODDP_STORE_MAX_HANDSHAKES)", s.Addr(), s.limits.MaxHandshakes, s.evicted)
			}
		}
		s.handshaking = append(s.handshaking, conn)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// handshaken takes conn off the handshake list.
func (s *Server) handshaken(conn net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.handshaking {
		if c == conn {
			s.handshaking = append(s.handshaking[:i], s.handshaking[i+1:]...)
			return
		}
	}
}

func (s *Server) dropConn(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
}

// frameDeadlines gives the reads of one request their deadlines: the idle
// timeout until its first byte, then the request timeout for the rest.
type frameDeadlines struct {
	conn          net.Conn
	idle, request time.Duration
	started       bool
}

func (d *frameDeadlines) next() {
	d.started = false
	var dl time.Time
	if d.idle > 0 {
		dl = time.Now().Add(d.idle)
	}
	d.conn.SetReadDeadline(dl)
}

func (d *frameDeadlines) Read(p []byte) (int, error) {
	n, err := d.conn.Read(p)
	if n > 0 && !d.started {
		d.started = true
		var dl time.Time
		if d.request > 0 {
			dl = time.Now().Add(d.request)
		}
		d.conn.SetReadDeadline(dl)
	}
	return n, err
}

// maxBlockedPerClient bounds the gets and waits one client may have
// blocked at once, each of which holds a goroutine.
const maxBlockedPerClient = 4096

// serveConn authenticates one client and answers its requests. Non-blocking
// requests are answered in order; a get or wait that must block gets its own
// goroutine, so one client can wait on a key while it sets others.
func (s *Server) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer s.dropConn(conn)
	_, err := auth.Server(conn, s.cfg.token, auth.PurposeStore, time.Now().Add(s.limits.HandshakeTimeout))
	s.handshaken(conn)
	if err != nil {
		if !errors.Is(err, net.ErrClosed) {
			s.cfg.logf("comm: store %s: refused connection from %s: %v", s.Addr(), conn.RemoteAddr(), err)
		}
		return
	}
	quota := &clientQuota{limit: s.limits.MaxClientBytes, who: conn.RemoteAddr().String()}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	connDone := make(chan struct{})
	var blocked sync.WaitGroup
	defer func() {
		close(connDone)
		blocked.Wait()
	}()
	var wmu sync.Mutex
	reply := func(r storeResponse) error {
		b := r.encode(nil)
		wmu.Lock()
		defer wmu.Unlock()
		// A client that stops reading must not hold a goroutine for ever.
		var dl time.Time
		if s.limits.RequestTimeout > 0 {
			dl = time.Now().Add(s.limits.RequestTimeout)
		}
		conn.SetWriteDeadline(dl)
		_, err := conn.Write(b)
		return err
	}
	var buf []byte
	var nblocked atomic.Int32
	rd := &frameDeadlines{conn: conn, idle: s.limits.IdleTimeout, request: s.limits.RequestTimeout}
	for {
		rd.next()
		frame, err := readStoreFrame(rd, buf)
		if err != nil && !rd.started && errors.Is(err, os.ErrDeadlineExceeded) && nblocked.Load() > 0 {
			continue // idle, but a blocked get or wait is pending: not idle
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.cfg.logf("comm: store %s: dropping client %s: %v", s.Addr(), conn.RemoteAddr(), err)
			}
			return
		}
		buf = frame
		req, err := decodeStoreRequest(frame)
		if err != nil {
			s.cfg.logf("comm: store %s: dropping client %s: %v", s.Addr(), conn.RemoteAddr(), err)
			return
		}
		resp := s.state.apply(&req, quota)
		if resp.Status == statusTimeout && req.Timeout > 0 {
			if nblocked.Load() >= maxBlockedPerClient {
				resp = storeResponse{ID: req.ID, Status: statusBadRequest,
					Value: fmt.Appendf(nil, "more than %d blocking gets and waits at once", maxBlockedPerClient)}
				if err := reply(resp); err != nil {
					return
				}
				continue
			}
			// A waiting request holds its keys and a goroutine: count them,
			// so that many clients cannot add up past the limits.
			cost, err := s.state.hold(&req, quota)
			if err != nil {
				if err := reply(failed(req.ID, err)); err != nil {
					return
				}
				continue
			}
			// Keys are strings (copied out of buf), so the request
			// survives the next read reusing buf.
			blocked.Add(1)
			nblocked.Add(1)
			go func() {
				defer blocked.Done()
				defer nblocked.Add(-1)
				defer s.state.unhold(quota, cost)
				if reply(s.state.serve(&req, quota, connDone, s.done)) != nil {
					conn.Close()
				}
			}()
			continue
		}
		if err := reply(resp); err != nil {
			return
		}
	}
}
