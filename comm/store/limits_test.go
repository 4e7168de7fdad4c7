package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
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
		RequestTimeout: DefaultRequestTimeout, MaxClientBytes: DefaultMaxClientBytes, MaxBytes: DefaultMaxBytes,
		MaxPendingBytes: DefaultMaxPendingBytes}, d)

	for k, v := range map[string]string{
		"GODDP_STORE_MAX_HANDSHAKES":    "many",
		"GODDP_STORE_HANDSHAKE_TIMEOUT": "0s",
		"GODDP_STORE_MAX_CLIENT_BYTES":  "2G",
		"GODDP_STORE_MAX_PENDING_BYTES": "lots",
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

// blockingGets issues n gets of missing keys of keyLen bytes at once on c,
// each waiting up to wait. refused returns the errors of those the store
// refused so far (a refusal comes back at once; the others wait), and rest
// waits for every get to end.
func blockingGets(c backend.Store, tag string, n, keyLen int, wait time.Duration) (refused func() []error, rest func()) {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := range n {
		key := fmt.Sprintf("%s/%d/", tag, i)
		key += strings.Repeat("k", keyLen-len(key))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			_, err := c.Get(ctx, key)
			if err != nil && !errors.Is(err, backend.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}, wg.Wait
}

// requireNothingPending waits for the server to have answered every
// waiting get (it answers each at its own timeout, which a client's
// context may beat by a moment).
func requireNothingPending(t *testing.T, srv *Server) {
	t.Helper()
	require.Eventually(t, func() bool {
		srv.state.mu.Lock()
		defer srv.state.mu.Unlock()
		return srv.state.pending == 0
	}, 5*time.Second, 10*time.Millisecond, "the waiting gets gave their bytes back")
}

// TestStorePendingCounted: a blocking get that waits holds its key and a
// goroutine on the server, so it counts against its client's
// MaxClientBytes like a stored value. 64 gets of 64 KiB keys from one
// client with a 1 MiB limit: at most 1 MiB of them wait, the rest are
// refused at once naming the limit, and the bytes come back when they end.
// Before issue 24 all 64 waited, and 4 clients x 4096 such gets took the
// store host to 1.15 GB.
func TestStorePendingCounted(t *testing.T) {
	const n, keyLen, limit = 64, 64 << 10, 1 << 20
	var log logSink
	srv := listenWith(t, Config{MaxClientBytes: limit}, &log)
	c, err := Dial(context.Background(), srv.Addr(), WithToken(testToken), WithTimeout(time.Minute))
	require.NoError(t, err)
	defer c.Close()
	refusedSoFar, rest := blockingGets(c, "a", n, keyLen, 3*time.Second)
	time.Sleep(1500 * time.Millisecond)
	refused := refusedSoFar()
	fits := limit / (keyLen + 32 + pendingOverhead)
	t.Logf("%d of %d gets refused; %d fit in %d bytes", len(refused), n, fits, limit)
	require.NotEmpty(t, refused, "every blocking get was left waiting, whatever its size")
	assert.GreaterOrEqual(t, len(refused), n-fits)
	assert.Contains(t, refused[0].Error(), "GODDP_STORE_MAX_CLIENT_BYTES")
	assert.Less(t, len(refused[0].Error()), 1024, "the error does not echo a 64 KiB key")
	rest()
	requireNothingPending(t, srv)
	require.NoError(t, c.Set(context.Background(), "after", bytes.Repeat([]byte{1}, limit/2)),
		"the client's quota is free again once its gets ended")
}

// TestStorePendingBytesLimit: the waiting gets of all clients together stop
// at MaxPendingBytes, so more connections cannot add up past it; the
// server's goroutines stay bounded by it; and a get that fits is served.
func TestStorePendingBytesLimit(t *testing.T) {
	const clients, n, keyLen, limit = 4, 32, 64 << 10, 1 << 20
	var log logSink
	srv := listenWith(t, Config{MaxPendingBytes: limit}, &log)
	before := runtime.NumGoroutine()
	var conns []backend.Store
	for range clients {
		c, err := Dial(context.Background(), srv.Addr(), WithToken(testToken), WithTimeout(time.Minute))
		require.NoError(t, err)
		defer c.Close()
		conns = append(conns, c)
	}
	var refusals []func() []error
	var rests []func()
	for i, c := range conns {
		refused, rest := blockingGets(c, fmt.Sprint(i), n, keyLen, 4*time.Second)
		refusals = append(refusals, refused)
		rests = append(rests, rest)
	}
	time.Sleep(2 * time.Second)
	var all []error
	for _, refused := range refusals {
		all = append(all, refused()...)
	}
	srv.state.mu.Lock()
	pending := srv.state.pending
	srv.state.mu.Unlock()
	fits := limit / (keyLen + 32 + pendingOverhead)
	t.Logf("%d of %d gets refused; %d bytes waiting (limit %d)", len(all), clients*n, pending, limit)
	require.NotEmpty(t, all, "the clients' waiting gets added up without limit")
	assert.GreaterOrEqual(t, len(all), clients*n-fits)
	assert.LessOrEqual(t, pending, limit)
	assert.Contains(t, all[0].Error(), "GODDP_STORE_MAX_PENDING_BYTES")
	// Each client runs n goroutines of its own (blockingGets); the server
	// adds one per waiting get, at most fits.
	assert.Less(t, runtime.NumGoroutine()-before, clients*(n+4)+fits+16)
	for _, rest := range rests {
		rest()
	}
	requireNothingPending(t, srv)
	// A get whose key appears is served as before.
	go func() {
		time.Sleep(100 * time.Millisecond)
		srv.Client().Set(context.Background(), "late", []byte("v"))
	}()
	v, err := conns[0].Get(context.Background(), "late")
	require.NoError(t, err)
	assert.Equal(t, "v", string(v))
}

// TestStoreTimeoutSaysHowLong: a get that times out says how long it
// waited, on every kind of store. Before issue 24 the TCP and in-process
// stores said "after 0s".
func TestStoreTimeoutSaysHowLong(t *testing.T) {
	const wait = 300 * time.Millisecond
	srv, err := Listen(context.Background(), "127.0.0.1:0", WithToken(testToken), WithTimeout(wait))
	require.NoError(t, err)
	defer srv.Close()
	remote, err := Dial(context.Background(), srv.Addr(), WithToken(testToken), WithTimeout(wait))
	require.NoError(t, err)
	defer remote.Close()
	file, err := NewFile(filepath.Join(t.TempDir(), "store"), WithTimeout(wait))
	require.NoError(t, err)
	defer file.Close()
	re := regexp.MustCompile(`after (\S+)$`)
	for name, s := range map[string]backend.Store{"tcp": remote, "local": srv.Client(), "file": file} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Get(context.Background(), "missing")
			require.ErrorIs(t, err, backend.ErrTimeout)
			m := re.FindStringSubmatch(err.Error())
			require.NotNil(t, m, "%v", err)
			d, perr := time.ParseDuration(m[1])
			require.NoError(t, perr, "%v", err)
			assert.GreaterOrEqual(t, d, wait-20*time.Millisecond, "%v", err)
			assert.Less(t, d, 5*time.Second, "%v", err)
		})
	}
}
