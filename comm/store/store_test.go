package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logSink collects log lines for assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// storeKinds builds each Store implementation; the second store returned
// is a separate client of the same data.
func storeKinds(t *testing.T) map[string]func(t *testing.T) (backend.Store, backend.Store) {
	return map[string]func(t *testing.T) (backend.Store, backend.Store){
		"tcp": func(t *testing.T) (backend.Store, backend.Store) {
			srv, err := Listen(context.Background(), "127.0.0.1:0", WithToken("test-token-0123456789"), WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { srv.Close() })
			a, err := Dial(context.Background(), srv.Addr(), WithToken("test-token-0123456789"), WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			b, err := Dial(context.Background(), srv.Addr(), WithToken("test-token-0123456789"), WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		},
		"local": func(t *testing.T) (backend.Store, backend.Store) {
			srv, err := Listen(context.Background(), "127.0.0.1:0", WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { srv.Close() })
			b, err := Dial(context.Background(), srv.Addr(), WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return srv.Client(), b
		},
		"file": func(t *testing.T) (backend.Store, backend.Store) {
			p := filepath.Join(t.TempDir(), "store")
			a, err := NewFile(p, WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			b, err := NewFile(p, WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		},
		"prefix": func(t *testing.T) (backend.Store, backend.Store) {
			srv, err := Listen(context.Background(), "127.0.0.1:0", WithTimeout(500*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { srv.Close() })
			return NewPrefix("job", srv.Client()), NewPrefix("job", srv.Client())
		},
	}
}

func TestStoreOps(t *testing.T) {
	for name, mk := range storeKinds(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, b := mk(t)

			require.NoError(t, a.Set(ctx, "k", []byte("v1")))
			v, err := b.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []byte("v1"), v)
			require.NoError(t, a.Set(ctx, "empty", nil))
			v, err = b.Get(ctx, "empty")
			require.NoError(t, err)
			assert.Empty(t, v)

			n, err := a.Add(ctx, "ctr", 5)
			require.NoError(t, err)
			assert.Equal(t, int64(5), n)
			n, err = b.Add(ctx, "ctr", -2)
			require.NoError(t, err)
			assert.Equal(t, int64(3), n)
			v, err = a.Get(ctx, "ctr")
			require.NoError(t, err)
			assert.Equal(t, "3", string(v))
			_, err = a.Add(ctx, "k", 1)
			assert.ErrorContains(t, err, "not an integer")

			got, err := a.CompareSet(ctx, "cas", nil, []byte("x"))
			require.NoError(t, err)
			assert.Equal(t, "x", string(got))
			got, err = b.CompareSet(ctx, "cas", []byte("nope"), []byte("y"))
			require.NoError(t, err)
			assert.Equal(t, "x", string(got))
			got, err = b.CompareSet(ctx, "cas", []byte("x"), []byte("y"))
			require.NoError(t, err)
			assert.Equal(t, "y", string(got))

			existed, err := a.Delete(ctx, "cas")
			require.NoError(t, err)
			assert.True(t, existed)
			existed, err = a.Delete(ctx, "cas")
			require.NoError(t, err)
			assert.False(t, existed)

			keys, err := a.NumKeys(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(3), keys) // k, empty, ctr

			// A blocking get wakes when another client sets the key.
			done := make(chan []byte, 1)
			go func() {
				v, err := b.Get(ctx, "late")
				assert.NoError(t, err)
				done <- v
			}()
			time.Sleep(30 * time.Millisecond)
			require.NoError(t, a.Set(ctx, "late", []byte("here")))
			select {
			case v := <-done:
				assert.Equal(t, "here", string(v))
			case <-time.After(3 * time.Second):
				t.Fatal("blocked get did not wake")
			}
			require.NoError(t, b.Wait(ctx, "k", "late"))

			// Missing keys time out with ErrTimeout, or end with ctx.
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err = b.Get(short, "never")
			require.Error(t, err)
			assert.True(t, errors.Is(err, backend.ErrTimeout) || errors.Is(err, context.DeadlineExceeded), "%v", err)
			start := time.Now()
			err = a.Wait(ctx, "k", "never")
			assert.ErrorIs(t, err, backend.ErrTimeout)
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

func TestStoreConcurrentAdd(t *testing.T) {
	for name, mk := range storeKinds(t) {
		t.Run(name, func(t *testing.T) {
			a, b := mk(t)
			var wg sync.WaitGroup
			for i := range 8 {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 25 {
						_, err := s.Add(context.Background(), "n", 1)
						assert.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			n, err := a.Add(context.Background(), "n", 0)
			require.NoError(t, err)
			assert.Equal(t, int64(200), n)
		})
	}
}

func TestStoreAuth(t *testing.T) {
	ctx := context.Background()
	var log logSink
	srv, err := Listen(ctx, "127.0.0.1:0", WithToken("s3cret-token-0123456"), WithLogger(log.logf))
	require.NoError(t, err)
	defer srv.Close()

	tests := []struct {
		name, token, logWant string
	}{
		{"no token", "", "client has no job token"},
		{"wrong token", "other-token-0123456789", "wrong job token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Dial(ctx, srv.Addr(), WithToken(tc.token), WithTimeout(500*time.Millisecond))
			require.ErrorIs(t, err, backend.ErrAuth)
			require.Eventually(t, func() bool { return strings.Contains(log.text(), tc.logWant) }, 2*time.Second, 10*time.Millisecond)
		})
	}
	assert.Contains(t, log.text(), "refused connection from 127.0.0.1:")
	assert.NotContains(t, log.text(), "s3cret")

	// A server without a token is refused by a client that has one.
	open, err := Listen(ctx, "127.0.0.1:0", WithLogger(log.logf))
	require.NoError(t, err)
	defer open.Close()
	_, err = Dial(ctx, open.Addr(), WithToken("s3cret-token-0123456"), WithTimeout(500*time.Millisecond))
	assert.ErrorIs(t, err, backend.ErrAuth)

	c, err := Dial(ctx, srv.Addr(), WithToken("s3cret-token-0123456"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "ok", []byte("1")))
}

func TestStoreGarbage(t *testing.T) {
	ctx := context.Background()
	var log logSink
	srv, err := Listen(ctx, "127.0.0.1:0", WithLogger(log.logf))
	require.NoError(t, err)
	defer srv.Close()

	payloads := map[string][]byte{
		"http":      []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"zeros":     make([]byte, 200),
		"short":     []byte("GD"),
		"huge info": append([]byte("GDDP\x02\x01\x00"), append(make([]byte, 32), 0xff, 0xff)...),
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Addr())
			require.NoError(t, err)
			conn.Write(p)
			conn.(*net.TCPConn).CloseWrite()
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 1024)
			for {
				if _, err := conn.Read(buf); err != nil {
					break
				}
			}
			conn.Close()
		})
	}
	// An authenticated client that then sends garbage frames is dropped.
	conn, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	require.NoError(t, auth.Client(conn, "", auth.PurposeStore, nil, time.Now().Add(time.Second)))
	conn.Write([]byte{0, 0, 0, 3, 0xee, 1, 2})
	conn.Write([]byte{0xff, 0xff, 0xff, 0xff})
	conn.Close()

	// The server still serves.
	c, err := Dial(ctx, srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "alive", []byte("yes")))
	v, err := c.Get(ctx, "alive")
	require.NoError(t, err)
	assert.Equal(t, "yes", string(v))
	require.Eventually(t, func() bool { return strings.Contains(log.text(), "unknown op") }, 2*time.Second, 10*time.Millisecond)
	assert.Contains(t, log.text(), "bad handshake magic")
}

func TestStoreListenExactAddr(t *testing.T) {
	srv, err := Listen(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	assert.True(t, strings.HasPrefix(srv.Addr(), "127.0.0.1:"), srv.Addr())
}

func TestStoreServerCloseFailsClients(t *testing.T) {
	srv, err := Listen(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	c, err := Dial(context.Background(), srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	errc := make(chan error, 1)
	go func() { _, err := c.Get(context.Background(), "never"); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	srv.Close()
	select {
	case err := <-errc:
		assert.Error(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("get did not fail when the server closed")
	}
}

func TestFileStoreTornRecord(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	a, err := NewFile(p)
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.Set(context.Background(), "x", []byte("1")))
	// Simulate a writer killed mid-append.
	fs := a.(*fileStore)
	_, err = fs.f.WriteAt([]byte{fileRecSet, 0, 0, 0, 9, 'a'}, fs.off)
	require.NoError(t, err)
	b, err := NewFile(p)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Set(context.Background(), "y", []byte("2")))
	v, err := a.Get(context.Background(), "y")
	require.NoError(t, err)
	assert.Equal(t, "2", string(v))
}
