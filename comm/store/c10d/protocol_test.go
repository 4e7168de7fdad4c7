package c10d

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
)

// TestValidatedDialect: against stand-ins for torch 2.x's libuv and
// classic servers, with and without PING, Dial picks the validated
// numbering and every connection of the pool opens with VALIDATE.
func TestValidatedDialect(t *testing.T) {
	for _, tc := range []struct {
		name        string
		libuv, ping bool
	}{
		{"libuv with ping", true, true},
		{"libuv before ping", true, false},
		{"classic with ping", false, true},
		{"classic before ping", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeValidated(t, tc.libuv, tc.ping)
			c := dialT(t, f.addr(), WithTimeout(10*time.Second))
			require.Equal(t, validated.name, c.Protocol())
			exercise(t, c)
			require.Zero(t, f.refused.Load(), "a connection did not open with VALIDATE")
		})
	}
}

// exercise runs every op, with enough blocked calls at once that the pool
// opens several connections.
func exercise(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	s := store.NewPrefix(AgentPrefix(0), c)
	var wg sync.WaitGroup
	got := make([]string, 6)
	for i := range got {
		wg.Go(func() {
			v, err := s.Get(ctx, fmt.Sprint("k", i))
			require.NoError(t, err)
			got[i] = string(v)
		})
	}
	time.Sleep(100 * time.Millisecond)
	for i := range got {
		require.NoError(t, s.Set(ctx, fmt.Sprint("k", i), fmt.Append(nil, "v", i)))
	}
	wg.Wait()
	require.Equal(t, []string{"v0", "v1", "v2", "v3", "v4", "v5"}, got)

	n, err := s.Add(ctx, "n", 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	v, err := s.CompareSet(ctx, "cas", []byte("x"), []byte("y"))
	require.NoError(t, err)
	require.Nil(t, v)
	v, err = s.CompareSet(ctx, "cas", nil, []byte("y"))
	require.NoError(t, err)
	require.Equal(t, "y", string(v))
	ok, err := c.Check(ctx, AgentPrefix(0)+"/n", AgentPrefix(0)+"/cas")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Wait(ctx, "n", "cas"))
	existed, err := s.Delete(ctx, "n")
	require.NoError(t, err)
	require.True(t, existed)
	keys, err := s.NumKeys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 7, keys)

	_, err = s.Get(ctx, string(make([]byte, 9<<10)))
	require.ErrorIs(t, err, backend.ErrBadArgument, "a key the libuv server would drop the connection for")
}

// TestDialRefusesOtherServers: what is not a torch TCPStore fails Dial
// with ErrProtocol naming the address: at once when it answers or hangs
// up, at the handshake's deadline when it stays silent.
func TestDialRefusesOtherServers(t *testing.T) {
	goddpStore, err := store.Listen(context.Background(), "127.0.0.1:0", store.WithLogger(func(string, ...any) {}))
	require.NoError(t, err)
	t.Cleanup(func() { goddpStore.Close() })
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	closer := listen(t, func(c net.Conn) { c.Close() })
	banner := listen(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); io.Copy(io.Discard, c) })
	silent := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })

	for _, tc := range []struct {
		name  string
		addr  string
		limit time.Duration
		want  string
	}{
		{"goddp's own store", goddpStore.Addr(), 3 * time.Second, "in both numberings"},
		{"a server that greets first", banner, 3 * time.Second, "answered torch's handshake with 53 53 48"},
		// It waits for a request line, as a torch store never makes a
		// client wait: the handshake's deadline ends it. When the
		// handshake's random ping holds a line feed, the server has a
		// malformed request line at once and answers "HTTP/1.1 400".
		{"an HTTP server", web.Listener.Addr().String(), time.Second, `no answer to torch's handshake|answered torch's handshake with 48 54 54 50`},
		{"a server that hangs up", closer, 3 * time.Second, "in both numberings"},
		{"a silent server", silent, time.Second, "no answer to torch's handshake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.limit)
			defer cancel()
			start := time.Now()
			_, err := Dial(ctx, tc.addr)
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.addr)
			require.Regexp(t, tc.want, err.Error())
			require.Less(t, time.Since(start), tc.limit+time.Second)
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := Dial(ctx, closedPort(t))
		require.ErrorIs(t, err, backend.ErrTimeout)
		require.ErrorContains(t, err, "not reachable")
	})
}

// listen serves every connection with serve until the test ends, when the
// connections still open are closed.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c); c.Close() })
		}
	})
	return l.Addr().String()
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}
