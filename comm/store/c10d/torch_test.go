package c10d

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
)

// python is Debian's interpreter, whose torch (1.13) hosts the stores.
const python = "/usr/bin/python3"

var torchOnce struct {
	sync.Once
	err error
}

// requireTorch skips the test when python3 cannot import torch.
func requireTorch(t *testing.T) {
	t.Helper()
	torchOnce.Do(func() {
		out, err := exec.Command(python, "-c", "import torch.distributed").CombinedOutput()
		if err != nil {
			torchOnce.err = errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
		}
	})
	if torchOnce.err != nil {
		t.Skipf("%s cannot import torch, so no torch TCPStore to test against: %v", python, torchOnce.err)
	}
}

// torchStore is a python3 child hosting a torch TCPStore (is_master) on
// loopback; see testdata/torchstore.py.
type torchStore struct {
	addr  string
	lines chan string
	stdin io.Closer
}

func startTorchStore(t *testing.T, args ...string) *torchStore {
	t.Helper()
	requireTorch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, python, append([]string{"testdata/torchstore.py"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("torch store's stderr:\n%s", stderr.String())
		}
	})
	ts := &torchStore{lines: make(chan string, 16), stdin: stdin}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ts.lines <- sc.Text()
		}
		close(ts.lines)
	}()
	port := ts.line(t, 60*time.Second)
	_, err = strconv.Atoi(port)
	require.NoError(t, err, "torch store printed %q, not a port", port)
	ts.addr = "127.0.0.1:" + port
	return ts
}

// line is the child's next line of output.
func (ts *torchStore) line(t *testing.T, limit time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-ts.lines:
		require.True(t, ok, "torch store exited early")
		return l
	case <-time.After(limit):
		t.Fatalf("torch store printed nothing within %v", limit)
		return ""
	}
}

func dialT(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTorch113Store runs every op against Debian's torch 1.13 TCPStore.
func TestTorch113Store(t *testing.T) {
	ts := startTorchStore(t, "serve")
	c := dialT(t, ts.addr, WithTimeout(20*time.Second))
	require.Equal(t, legacy.name, c.Protocol())
	ctx := context.Background()

	// The probe stored nothing.
	n, err := c.NumKeys(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	v, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "1", string(v))
	require.NoError(t, c.Set(ctx, "empty", nil))
	v, err = c.Get(ctx, "empty")
	require.NoError(t, err)
	require.Empty(t, v)

	sum, err := c.Add(ctx, "n", 5)
	require.NoError(t, err)
	require.EqualValues(t, 5, sum)
	sum, err = c.Add(ctx, "n", -7)
	require.NoError(t, err)
	require.EqualValues(t, -2, sum)
	v, err = c.Get(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, "-2", string(v), "torch keeps counters as decimal text, as goddp's stores do")

	probe := []byte("\x00probe\x00")
	for _, tc := range []struct {
		name              string
		key               string
		expected, desired string
		want              string // "" means nil
	}{
		{"missing key, read only", "cas", string(probe), string(probe), ""},
		{"missing key, other expected", "cas", "x", "y", ""},
		{"missing key, empty expected creates", "cas", "", "one", "one"},
		{"held key, wrong expected", "cas", "two", "three", "one"},
		{"held key, right expected swaps", "cas", "one", "two", "two"},
		{"held key, read only", "cas", string(probe), string(probe), "two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.CompareSet(ctx, tc.key, []byte(tc.expected), []byte(tc.desired))
			require.NoError(t, err)
			if tc.want == "" {
				require.Nil(t, got)
			} else {
				require.Equal(t, tc.want, string(got))
			}
		})
	}

	ok, err := c.Check(ctx, "a", "n")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.Check(ctx, "a", "nope")
	require.NoError(t, err)
	require.False(t, ok)

	existed, err := c.Delete(ctx, "a")
	require.NoError(t, err)
	require.True(t, existed)
	existed, err = c.Delete(ctx, "a")
	require.NoError(t, err)
	require.False(t, existed)
	n, err = c.NumKeys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "empty, n and cas")

	// Blocking: two gets and a wait, each on its own connection, released
	// by sets from elsewhere.
	other := dialT(t, ts.addr)
	var wg sync.WaitGroup
	got := make([]string, 2)
	errs := make([]error, 3)
	for i, k := range []string{"late1", "late2"} {
		wg.Go(func() {
			v, err := c.Get(ctx, k)
			got[i], errs[i] = string(v), err
		})
	}
	wg.Go(func() { errs[2] = c.Wait(ctx, "late1", "late2") })
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, other.Set(ctx, "late2", []byte("B")))
	require.NoError(t, other.Set(ctx, "late1", []byte("A")))
	wg.Wait()
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Equal(t, []string{"A", "B"}, got)

	// torch 1.13 wakes no waiter when compare_set creates the key, and
	// goddp's rendezvous claims its keys that way.
	done := make(chan error)
	go func() {
		v, err := c.Get(ctx, "claimed")
		if err == nil && string(v) != "mine" {
			err = errors.New("got " + string(v))
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	v, err = other.CompareSet(ctx, "claimed", nil, []byte("mine"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(v))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a get missed a key created by compare-set")
	}
}

// TestTorch113Timeouts: a get past its deadline fails with ErrTimeout and
// leaves the client usable (the abandoned wait's connection is dropped, so
// the server's late STOP_WAITING cannot reach a later call); a cancelled
// ctx and Close interrupt a blocked get.
func TestTorch113Timeouts(t *testing.T) {
	ts := startTorchStore(t, "serve")
	c := dialT(t, ts.addr, WithTimeout(time.Second))
	ctx := context.Background()

	start := time.Now()
	_, err := c.Get(ctx, "never")
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.Contains(t, err.Error(), ts.addr)
	require.Contains(t, err.Error(), `"never"`)
	require.Less(t, time.Since(start), 5*time.Second)

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = c.Wait(short, "never")
	cancel()
	require.ErrorIs(t, err, backend.ErrTimeout)

	// The key appears now: the abandoned waits' answers must not leak
	// into these calls.
	require.NoError(t, c.Set(ctx, "never", []byte("now")))
	for range 3 {
		v, err := c.Get(ctx, "never")
		require.NoError(t, err)
		require.Equal(t, "now", string(v))
		n, err := c.NumKeys(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}

	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { _, err := c.Get(cctx, "later"); done <- err }()
	time.Sleep(100 * time.Millisecond)
	ccancel()
	require.ErrorIs(t, <-done, context.Canceled)

	long := dialT(t, ts.addr, WithTimeout(time.Minute))
	go func() { _, err := long.Get(ctx, "later"); done <- err }()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, long.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, backend.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt a blocked get")
	}
}

// TestTorchWorkerInterop: goddp's client under AgentPrefix and a torch
// worker's own store (PrefixStore over a TCPStore client) see the same
// keys, so goddp writes where torch's workers write.
func TestTorchWorkerInterop(t *testing.T) {
	ts := startTorchStore(t, "worker", AgentPrefix(3))
	c := dialT(t, ts.addr, WithTimeout(30*time.Second))
	s := store.NewPrefix(AgentPrefix(3), c)
	ctx := context.Background()

	v, err := s.Get(ctx, "from_torch")
	require.NoError(t, err)
	require.Equal(t, "hello from torch", string(v))
	_, err = s.CompareSet(ctx, "cas", nil, []byte("go"))
	require.NoError(t, err)
	sum, err := s.Add(ctx, "counter", 2)
	require.NoError(t, err)
	require.Positive(t, sum)
	require.NoError(t, s.Set(ctx, "from_go", []byte("hello from go")))

	require.Equal(t, "from_go=hello from go", ts.line(t, 30*time.Second))
	require.Equal(t, "counter=7", ts.line(t, 30*time.Second))
	require.Equal(t, "cas=torch", ts.line(t, 30*time.Second))
	v, err = s.Get(ctx, "torch_done")
	require.NoError(t, err)
	require.Equal(t, "1", string(v))
	v, err = s.Get(ctx, "cas")
	require.NoError(t, err)
	require.Equal(t, "torch", string(v))
}
