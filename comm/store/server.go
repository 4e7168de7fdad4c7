package store

import (
	"context"
	"errors"
	"fmt"
	"goddp/comm/backend"
	"goddp/comm/internal/auth"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Option configures Listen, Dial and NewFile.
type Option func(*storeConfig)

type storeConfig struct {
	token   string
	timeout time.Duration
	logf    func(format string, args ...any)
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
	cfg   storeConfig
	ln    net.Listener
	state *storeState
	done  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen starts a store server bound to exactly addr ("127.0.0.1:0"
// picks a free port; an explicit "0.0.0.0:port" is needed to listen on every
// interface).
func Listen(ctx context.Context, addr string, opts ...Option) (*Server, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("comm: store: listen on %s: %w", addr, err)
	}
	s := &Server{
		cfg:   newStoreConfig(opts),
		ln:    ln,
		state: newStoreState(),
		done:  make(chan struct{}),
		conns: map[net.Conn]struct{}{},
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
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

func (s *Server) dropConn(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
}

// serveConn authenticates one client and answers its requests. Non-blocking
// requests are answered in order; a get or wait that must block gets its own
// goroutine, so one client can wait on a key while it sets others.
func (s *Server) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer s.dropConn(conn)
	if _, err := auth.Server(conn, s.cfg.token, auth.PurposeStore, time.Time{}); err != nil {
		s.cfg.logf("comm: store %s: refused connection from %s: %v", s.Addr(), conn.RemoteAddr(), err)
		return
	}
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
		_, err := conn.Write(b)
		return err
	}
	var buf []byte
	for {
		frame, err := readStoreFrame(conn, buf)
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
		resp := s.state.apply(&req)
		if resp.Status == statusTimeout && req.Timeout > 0 {
			// Keys are strings (copied out of buf), so the request
			// survives the next read reusing buf.
			blocked.Add(1)
			go func() {
				defer blocked.Done()
				if reply(s.state.serve(&req, connDone, s.done)) != nil {
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
