package tcp

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"github.com/goddp/goddp/comm/store"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// connectMesh builds the full mesh: every rank listens on its own host,
// publishes the address in the store, dials every lower rank and accepts
// every higher one. Each connection opens with the token handshake
// (comm/internal/auth) bound to this group and to both ranks, so a stranger, a stale
// process from an earlier attempt or a rank of another group is refused
// and logged, and the mesh waits for the right peer.
func (g *tcpGroup) connectMesh(ctx context.Context) error {
	if g.size == 1 {
		return nil
	}
	bind := g.listenAddr()
	if err := auth.CheckListen(bind, g.opts.Token, g.opts.Insecure); err != nil {
		return fmt.Errorf("comm: tcp rank %d: %w", g.rank, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", bind)
	if err != nil {
		return fmt.Errorf("comm: tcp rank %d: listen on %s: %w", g.rank, bind, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	if err := g.opts.Store.Set(ctx, "tcp/addr/"+strconv.Itoa(g.rank), []byte(ln.Addr().String())); err != nil {
		return fmt.Errorf("comm: tcp rank %d: publish address: %w", g.rank, err)
	}

	var mu sync.Mutex
	conns := make([]net.Conn, g.size)
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for i, c := range conns {
			if c != nil {
				c.Close()
				conns[i] = nil
			}
		}
	}
	bufBytes := g.cfg.SocketBuffer
	congestion := g.cfg.Congestion

	// Accept the higher ranks. hs counts the accept loop and every handshake
	// it starts (the loop's own count keeps hs above zero while it adds);
	// handshaking holds the connections still in a handshake, oldest
	// first, so that once the mesh is complete or has failed, a stranger
	// that connected and went silent is cut off instead of holding
	// connectMesh for auth.Timeout. At most maxHandshakes are held: one
	// more evicts the oldest, so a flood costs a bounded number of sockets
	// and goroutines, and a real peer, whose handshake takes a round trip,
	// is pushed out only by a flood faster than that per round trip (it
	// then redials).
	want := g.size - 1 - g.rank
	maxHandshakes := peerHandshakes + g.size
	accepted := make(chan struct{}, g.size)
	acceptErr := make(chan error, 1)
	var hs sync.WaitGroup
	var handshaking []net.Conn
	evicted := 0
	evictedConns := map[net.Conn]bool{} // counted, not logged one by one
	stopped := false                    // guarded by mu, like handshaking
	unlist := func(c net.Conn) {
		for i, x := range handshaking {
			if x == c {
				handshaking = append(handshaking[:i], handshaking[i+1:]...)
				return
			}
		}
	}
	hs.Add(1)
	go func() {
		defer hs.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				c.Close()
				continue // Accept fails next: the listener is closed
			}
			if len(handshaking) >= maxHandshakes {
				handshaking[0].Close()
				evictedConns[handshaking[0]] = true
				handshaking = handshaking[1:]
				if evicted++; evicted == 1 || evicted%1000 == 0 {
					g.logf("comm: tcp rank %d: more than %d connections in the handshake at once (a flood?); dropped the oldest, %d so far",
						g.rank, maxHandshakes, evicted)
				}
			}
			handshaking = append(handshaking, c)
			mu.Unlock()
			hs.Add(1)
			go func() {
				defer hs.Done()
				from, err := g.acceptPeer(c)
				mu.Lock()
				unlist(c)
				wasEvicted := evictedConns[c]
				delete(evictedConns, c)
				mu.Unlock()
				if wasEvicted {
					c.Close()
					return
				}
				if err != nil {
					g.logf("comm: tcp rank %d: refused connection from %s: %v", g.rank, c.RemoteAddr(), err)
					c.Close()
					return
				}
				setSocketOptions(c, bufBytes, congestion)
				mu.Lock()
				if conns[from] != nil {
					mu.Unlock()
					g.logf("comm: tcp rank %d: refused a second connection from rank %d (%s)", g.rank, from, c.RemoteAddr())
					c.Close()
					return
				}
				conns[from] = c
				mu.Unlock()
				accepted <- struct{}{}
			}()
		}
	}()

	// Dial the lower ranks.
	dialErr := make(chan error, g.size)
	for j := 0; j < g.rank; j++ {
		go func() {
			c, err := g.dialPeer(ctx, j, bufBytes, congestion)
			if err != nil {
				dialErr <- err
				return
			}
			mu.Lock()
			conns[j] = c
			mu.Unlock()
			dialErr <- nil
		}()
	}

	// stopAccepting closes the listener and any connection still in its
	// handshake, then waits for the accept goroutines.
	stopAccepting := func() {
		ln.Close()
		mu.Lock()
		stopped = true
		for _, c := range handshaking {
			c.Close()
		}
		handshaking = nil
		mu.Unlock()
		hs.Wait()
	}
	fail := func(err error) error {
		stopAccepting()
		closeAll()
		return err
	}
	for got, dialed := 0, 0; got < want || dialed < g.rank; {
		select {
		case <-accepted:
			got++
		case err := <-dialErr:
			if err != nil {
				return fail(err)
			}
			dialed++
		case err := <-acceptErr:
			if ctx.Err() == nil {
				return fail(fmt.Errorf("comm: tcp rank %d: accept: %w", g.rank, err))
			}
			return fail(g.meshTimeout(ctx, conns, &mu))
		case <-ctx.Done():
			return fail(g.meshTimeout(ctx, conns, &mu))
		}
	}
	stopAccepting()
	for r, c := range conns {
		if r != g.rank {
			g.peers[r] = newPeerConn(g, r, c)
		}
	}
	return nil
}

// peerHandshakes is how many connections beyond the group's size a peer
// listener holds in the handshake at once.
const peerHandshakes = 64

// meshTimeout names the ranks that never connected.
func (g *tcpGroup) meshTimeout(ctx context.Context, conns []net.Conn, mu *sync.Mutex) error {
	mu.Lock()
	var missing []int
	for r, c := range conns {
		if r != g.rank && c == nil {
			missing = append(missing, r)
		}
	}
	mu.Unlock()
	kind := backend.ErrTimeout
	if errors.Is(ctx.Err(), context.Canceled) {
		kind = ctx.Err()
	}
	return fmt.Errorf("%w: comm: tcp rank %d: %s did not connect (are they running, with the same GODDP_TOKEN?)",
		kind, g.rank, backend.RankList(missing))
}

// listenAddr is where this rank's peer listener binds.
func (g *tcpGroup) listenAddr() string {
	a := g.opts.Addr
	if a == "" {
		if ta, ok := store.LocalAddr(g.opts.Store).(*net.TCPAddr); ok && ta != nil {
			a = ta.IP.String()
		} else {
			a = "127.0.0.1"
		}
	}
	if _, _, err := net.SplitHostPort(a); err == nil {
		return a
	}
	return net.JoinHostPort(strings.Trim(a, "[]"), "0")
}

// peerInfo binds a handshake to this group and to both ranks.
func (g *tcpGroup) peerInfo(from, to int) []byte {
	return []byte(fmt.Sprintf("goddp-peer|%s|%d|%d|%d", g.opts.Prefix, g.size, from, to))
}

// acceptPeer authenticates an incoming connection and returns the rank it
// comes from.
func (g *tcpGroup) acceptPeer(c net.Conn) (int, error) {
	info, err := auth.Server(c, g.opts.Token, auth.PurposePeer, time.Time{})
	if err != nil {
		return 0, err
	}
	parts := strings.Split(string(info), "|")
	if len(parts) != 5 || parts[0] != "goddp-peer" {
		return 0, fmt.Errorf("%w: malformed peer hello", backend.ErrAuth)
	}
	from, err1 := strconv.Atoi(parts[3])
	to, err2 := strconv.Atoi(parts[4])
	switch {
	case err1 != nil || err2 != nil:
		return 0, fmt.Errorf("%w: malformed peer hello", backend.ErrAuth)
	case parts[1] != g.opts.Prefix || parts[2] != strconv.Itoa(g.size):
		return 0, fmt.Errorf("%w: peer belongs to another group (%q of size %s)", backend.ErrAuth, parts[1], parts[2])
	case to != g.rank || from <= g.rank || from >= g.size:
		return 0, fmt.Errorf("%w: peer claims rank %d dialling rank %d", backend.ErrAuth, from, to)
	}
	return from, nil
}

// dialPeer connects to rank j, retrying transient failures until ctx ends.
func (g *tcpGroup) dialPeer(ctx context.Context, j int, bufBytes int, congestion string) (net.Conn, error) {
	v, err := g.opts.Store.Get(ctx, "tcp/addr/"+strconv.Itoa(j))
	if err != nil {
		return nil, fmt.Errorf("comm: tcp rank %d: address of rank %d: %w", g.rank, j, err)
	}
	addr := string(v)
	backoff := 10 * time.Millisecond
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			dl, _ := ctx.Deadline()
			if err = auth.Client(c, g.opts.Token, auth.PurposePeer, g.peerInfo(g.rank, j), dl); err == nil {
				setSocketOptions(c, bufBytes, congestion)
				return c, nil
			}
			c.Close()
			if errors.Is(err, backend.ErrAuth) {
				return nil, fmt.Errorf("comm: tcp rank %d: connect to rank %d at %s: %w", g.rank, j, addr, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: comm: tcp rank %d: connect to rank %d at %s: %v", backend.ErrTimeout, g.rank, j, addr, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
