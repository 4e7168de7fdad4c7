package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/comm/backend"
	"goddp/comm/internal/auth"
)

const testToken = "limits-token-0123456789"

func listenWith(t *testing.T, c Config, log *logSink) *Server {
	t.Helper()
	srv, err := Listen(context.Background(), "127.0.0.1:0", WithToken(testToken), WithConfig(c), WithLogger(log.logf))
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// closedByPeer reports whether the server has closed c (EOF or reset)
// within d, as opposed to leaving it open.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 256)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // the server's handshake answer
		}
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
}

// TestStoreHandshakeFlood opens 200 connections that start a handshake and
// go silent. The server holds at most MaxHandshakes of them (it closes the
// oldest beyond that at once, not after the 10 s handshake timeout), its
// goroutines stay bounded, and a real client still gets in during the flood.
// Before issue 17 every silent connection held a goroutine and a socket for
// the full handshake timeout.
func TestStoreHandshakeFlood(t *testing.T) {
	const flood, limit = 200, 8
	var log logSink
	srv := listenWith(t, Config{MaxHandshakes: limit, HandshakeTimeout: 10 * time.Second}, &log)
	before := runtime.NumGoroutine()
	conns := make([]net.Conn, flood)
	for i := range conns {
		c, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		defer c.Close()
		c.Write([]byte("GDDP")) // half a hello, then silence
		conns[i] = c
	}
	// The flood is accepted in order; give the server a moment to reach the end.
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.evicted >= flood-limit
	}, 5*time.Second, 10*time.Millisecond, "the server holds more than %d handshakes", limit)
	closed := 0
	for _, c := range conns {
		if closedByPeer(c, 20*time.Millisecond) {
			closed++
		}
	}
	t.Logf("%d of %d silent connections closed by the server within a second; goroutines %d -> %d",
		closed, flood, before, runtime.NumGoroutine())
	assert.GreaterOrEqual(t, closed, flood-limit)
	assert.Less(t, runtime.NumGoroutine()-before, 2*limit+8, "goroutines stay bounded by the handshake cap")
	assert.Contains(t, log.text(), "GODDP_STORE_MAX_HANDSHAKES")

	// A real client gets in while more silent connections keep coming.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c, err := net.Dial("tcp", srv.Addr()); err == nil {
				defer c.Close()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, srv.Addr(), WithToken(testToken))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", []byte("v")))
}

// TestStoreClientQuota: one client cannot hold more than MaxClientBytes,
// overwriting its own key does not add up, deleting frees, and all clients
// together stop at MaxBytes; the hosting process is never refused.
func TestStoreClientQuota(t *testing.T) {
	ctx := context.Background()
	var log logSink
	srv := listenWith(t, Config{MaxClientBytes: 1 << 20, MaxBytes: 3 << 20}, &log)
	dial := func() backend.Store {
		c, err := Dial(ctx, srv.Addr(), WithToken(testToken))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := dial()
	val := bytes.Repeat([]byte{1}, 100<<10)
	n := 0
	var err error
	for ; n < 100; n++ {
		if err = a.Set(ctx, "a/"+string(rune('A'+n)), val); err != nil {
			break
		}
	}
	require.Error(t, err, "a client filled the store without limit")
	assert.Equal(t, 10, n, "ten 100 KiB values fit in 1 MiB, the eleventh does not")
	assert.Contains(t, err.Error(), "GODDP_STORE_MAX_CLIENT_BYTES")
	for range 20 {
		require.NoError(t, a.Set(ctx, "a/A", val), "overwriting a key holds its bytes once")
	}
	ok, err := a.Delete(ctx, "a/B")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Set(ctx, "a/new", val), "a delete frees the client's bytes")

	// Three more clients: the store as a whole stops at 3 MiB.
	total := 10 * (100<<10 + 4 + entryOverhead)
	var last error
	for _, c := range []backend.Store{dial(), dial(), dial()} {
		for i := 0; i < 10 && last == nil; i++ {
			if last = c.Set(ctx, "b/"+string(rune('A'+i))+c.(*storeClient).conn.LocalAddr().String(), val); last == nil {
				total += 100<<10 + 4 + entryOverhead
			}
		}
	}
	require.Error(t, last)
	assert.Contains(t, last.Error(), "GODDP_STORE_MAX_BYTES")
	assert.LessOrEqual(t, total, 3<<20)
	// The hosting process is trusted and never refused.
	require.NoError(t, srv.Client().Set(ctx, "host/big", bytes.Repeat([]byte{2}, 2<<20)))
}

// TestStoreDeadlines: a client that stops half way through a request is
// dropped after RequestTimeout; with IdleTimeout set, a silent client is
// dropped, but not one whose blocking get is pending.
func TestStoreDeadlines(t *testing.T) {
	ctx := context.Background()
	var log logSink
	srv := listenWith(t, Config{RequestTimeout: 300 * time.Millisecond, IdleTimeout: 600 * time.Millisecond}, &log)
	raw := func() net.Conn {
		c, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, auth.Client(c, testToken, auth.PurposeStore, nil, time.Now().Add(5*time.Second)))
		return c
	}
	half := raw()
	half.Write([]byte{0, 0, 1}) // three bytes of a length, then nothing
	began := time.Now()
	_, err := io.ReadAll(half)
	assert.NoError(t, err, "the server closes the connection")
	assert.Less(t, time.Since(began), 2*time.Second)
	assert.Greater(t, time.Since(began), 250*time.Millisecond)

	idle := raw()
	began = time.Now()
	io.ReadAll(idle)
	assert.Less(t, time.Since(began), 3*time.Second, "an idle client is dropped")

	// A get that blocks for longer than the idle timeout keeps its client.
	c, err := Dial(ctx, srv.Addr(), WithToken(testToken), WithTimeout(10*time.Second))
	require.NoError(t, err)
	defer c.Close()
	go func() {
		time.Sleep(1500 * time.Millisecond)
		srv.Client().Set(ctx, "late", []byte("x"))
	}()
	v, err := c.Get(ctx, "late")
	require.NoError(t, err)
	assert.Equal(t, "x", string(v))
}

func TestStoreConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"GODDP_STORE_MAX_HANDSHAKES": "32", "GODDP_STORE_HANDSHAKE_TIMEOUT": "5s", "GODDP_STORE_REQUEST_TIMEOUT": "0s",
		"GODDP_STORE_IDLE_TIMEOUT": "1h", "GODDP_STORE_MAX_CLIENT_BYTES": "64M", "GODDP_STORE_MAX_BYTES": "1G",
	}
	c, err := configFrom(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, Config{MaxHandshakes: 32, HandshakeTimeout: 5 * time.Second, RequestTimeout: -1,
		IdleTimeout: time.Hour, MaxClientBytes: 64 << 20, MaxBytes: 1 << 30}, c)
	r := c.resolve()
	assert.Equal(t, time.Duration(0), r.RequestTimeout, "0s turns the request timeout off")
	d := Config{}.resolve()
	assert.Equal(t, Config{MaxHandshakes: DefaultMaxHandshakes, HandshakeTimeout: DefaultHandshakeTimeout,
		RequestTimeout: DefaultRequestTimeout, MaxClientBytes: DefaultMaxClientBytes, MaxBytes: DefaultMaxBytes}, d)

	for k, v := range map[string]string{
		"GODDP_STORE_MAX_HANDSHAKES":    "many",
		"GODDP_STORE_HANDSHAKE_TIMEOUT": "0s",
		"GODDP_STORE_MAX_CLIENT_BYTES":  "2G",
	} {
		_, err := configFrom(func(key string) (string, bool) {
			if key == k {
				return v, true
			}
			return "", false
		})
		require.Error(t, err, k)
		assert.ErrorIs(t, err, backend.ErrBadArgument)
		assert.Contains(t, err.Error(), k)
	}
}

// TestStoreListenRefusesNoToken: a store on every interface needs a token
// unless WithInsecure.
func TestStoreListenRefusesNoToken(t *testing.T) {
	_, err := Listen(context.Background(), "0.0.0.0:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GODDP_TOKEN")
	srv, err := Listen(context.Background(), "0.0.0.0:0", WithInsecure())
	require.NoError(t, err)
	srv.Close()
	_, err = Listen(context.Background(), "127.0.0.1:0", WithToken("short"))
	assert.ErrorContains(t, err, "at least 16")
}
