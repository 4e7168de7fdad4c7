//go:build linux

package trainer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// hostileEnv tells the test binary, run again by startHostile, to be the
// hostile clients: "ADDR COUNT REDIAL" (REDIAL a duration: how long a
// client whose connection the server closed waits before dialing again;
// 0 never).
const hostileEnv = "GODDP_TEST_HOSTILE_CLIENTS"

// hostileKinds are the hostile clients, dealt round-robin.
var hostileKinds = []string{
	"reader that never reads", // GET /data.json, then never reads the answer
	"idle keep-alive",         // one whole request and answer, then silence
	"half-sent headers",       // a request line and half a header, then silence
}

// TestHostileClientsHelper is no test of its own: it is the hostile
// clients of TestDashboardHostileClients and the benchmark, in a process
// of their own, so that the trainer's process counts only its own side of
// each connection in /proc/self/fd.
func TestHostileClientsHelper(t *testing.T) {
	spec := os.Getenv(hostileEnv)
	if spec == "" {
		t.Skip("the hostile clients of TestDashboardHostileClients, started by it in their own process")
	}
	var addr, period string
	var n int
	_, err := fmt.Sscan(spec, &addr, &n, &period)
	require.NoError(t, err, "%s=%q", hostileEnv, spec)
	redial, err := time.ParseDuration(period)
	require.NoError(t, err, "%s=%q", hostileEnv, spec)
	var (
		mu     sync.Mutex
		conns  []net.Conn // held until the parent closes stdin
		held   atomic.Int64
		closed atomic.Int64
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 32)
		stop   = make(chan struct{})
	)
	hold := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := hostileConn(addr, i%len(hostileKinds))
			if err != nil {
				closed.Add(1) // the server closed it at once
				if redial > 0 {
					go redialLoop(addr, i%len(hostileKinds), redial, stop, hold)
				}
				return
			}
			held.Add(1)
			hold(c)
		})
	}
	wg.Wait()
	fmt.Printf("ready sent=%d closed-before-sending=%d\n", held.Load(), closed.Load())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	close(stop)
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
}

// redialLoop dials again, every period, a client the server closed.
func redialLoop(addr string, kind int, period time.Duration, stop chan struct{}, hold func(net.Conn)) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(period):
		}
		if c, err := hostileConn(addr, kind); err == nil {
			hold(c)
			return
		}
	}
}

// hostileConn opens one hostile client of the given kind; an error means
// the server closed it.
func hostileConn(addr string, kind int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	// A small receive window: the server's answer sits in its own memory,
	// not in the kernel's buffers.
	_ = c.(*net.TCPConn).SetReadBuffer(1024)
	req := ""
	switch kind {
	case 0:
		req = "GET /data.json?since=0 HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	case 1:
		req = "GET /dashboard.js HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	case 2:
		req = "GET /data.json HTTP/1.1\r\nHost: " + addr + "\r\nX-Half: "
	}
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	if kind == 1 {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		_ = c.SetReadDeadline(time.Time{})
	}
	return c, nil
}

// hostileCount is how many hostile clients a test opens: 5000, or fewer
// when the hard limit on open files leaves less room (Go raises the soft
// limit to the hard one when a program starts).
func hostileCount(tb testing.TB) int {
	const want = 5000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Logf("no RLIMIT_NOFILE (%v): %d hostile clients", err, want)
		return want
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if room := int(lim.Cur) - 256; room < want {
		tb.Logf("open files limited to %d here: %d hostile clients instead of %d", lim.Cur, max(room, 100), want)
		return max(room, 100)
	}
	return want
}

// hostile is the hostile clients' process.
type hostile struct {
	cmd   *exec.Cmd
	stdin io.Closer
	ready string
}

// startHostile runs n hostile clients against addr in a process of their
// own and waits until each has connected and sent what it sends.
func startHostile(tb testing.TB, addr string, n int, redial time.Duration) *hostile {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileClientsHelper$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", hostileEnv, addr, n, redial))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	h := &hostile{cmd: cmd, stdin: stdin}
	tb.Cleanup(h.stop)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				line <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case h.ready = <-line:
	case <-time.After(2 * time.Minute):
		tb.Fatalf("the hostile clients did not connect within 2 minutes")
	}
	return h
}

// stop ends the hostile clients' process (closing its stdin), once.
func (h *hostile) stop() {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(es)
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// longRun is a long run's worth of train records for the page to hand out.
func longRun(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Kind: KindTrain, Step: 10 * (i + 1), Loss: 2 / float64(i+1), LR: 0.1,
			SamplesPerS: 12345.678, AllReduceHiddenPct: 87.5, ElapsedS: float64(i) / 3}
	}
	return recs
}

// TestDashboardHostileClients: 5,000 hostile clients of the live page (a
// third each: readers of data.json that never read, idle keep-alives,
// half-sent headers) connect to rank 0's page, which already holds a long
// run's records, and stay while two ranks train three epochs and save a
// checkpoint after each. Every checkpoint is saved, training finishes,
// rank 0's open files stay within the page's connection cap of what they
// were (they grew by one per client, to the file limit, before the cap),
// its heap stays bounded (every never-reading client pinned a copy of the
// records before data.json was encoded once and shared), and once the
// clients leave the page answers again.
func TestDashboardHostileClients(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skipf("counts open files in /proc/self/fd: %v", err)
	}
	n := hostileCount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	prior := longRun(4000)
	for _, r := range prior {
		require.NoError(t, d.Log(r))
	}
	runtime.GC()
	baseFDs, baseHeap := openFDs(t), heapInUse()

	h := startHostile(t, d.ln.Addr().String(), n, 0)
	t.Logf("%d hostile clients (%s): %s", n, strings.Join(hostileKinds, ", "), h.ready)
	// Let the server take in what the clients sent (reading nothing is
	// asserted from here): wait until the open files stop changing.
	settle := time.Now().Add(30 * time.Second)
	for last := -1; time.Now().Before(settle); time.Sleep(100 * time.Millisecond) {
		now := openFDs(t)
		if now == last {
			break
		}
		last = now
	}

	var maxFDs int
	var maxHeap uint64
	sample := func() {
		maxFDs = max(maxFDs, openFDs(t))
		maxHeap = max(maxHeap, heapInUse())
	}
	dir := t.TempDir()
	rs := newWorldWith(t, ctx, dir, func(r int, _ comm.ProcessGroup, c *Config) {
		c.SaveEvery, c.Loss = 1, mse
		if r == 0 {
			c.Loggers, c.LogEvery = []Logger{d}, 1
			c.Callbacks = []Callback{Funcs{Step: func(context.Context, *Trainer, StepInfo) error { sample(); return nil }}}
		}
	})
	requireBuilt(t, rs)
	const epochs = 3
	for r, err := range train(ctx, rs, epochs) {
		require.NoError(t, err, "rank %d", r)
	}
	sample()
	assert.Equal(t, epochs, strings.Count(rs[0].out.String(), "Training checkpoint saved"), rs[0].out.String())
	assert.Len(t, listNames(t, dir), epochs, "every checkpoint saved")

	// The cap, plus the few files the run opens itself (checkpoint files,
	// the pipes to the clients' process).
	const slack = 32
	t.Logf("open files: %d before the clients, at most %d while training (cap %d connections)", baseFDs, maxFDs, dashboardMaxConns)
	assert.LessOrEqual(t, maxFDs, baseFDs+dashboardMaxConns+slack, "open files bounded by the page's connection cap")
	const heapBound = 64 << 20
	t.Logf("heap in use: %.1f MiB before the clients, at most %.1f MiB while training", float64(baseHeap)/(1<<20), float64(maxHeap)/(1<<20))
	assert.Less(t, int64(maxHeap)-int64(baseHeap), int64(heapBound), "heap bounded whatever the clients do")

	h.stop()
	// The page answers again once the clients' connections are gone (the
	// server notices each close as it reads or writes it).
	var dd dashboardData
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(d.URL() + "data.json?since=4000")
		if err == nil {
			err = json.NewDecoder(res.Body).Decode(&dd)
			res.Body.Close()
		}
		if err == nil || time.Now().After(deadline) {
			require.NoError(t, err, "the page answers once the hostile clients left")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, len(prior)+len(dd.Records), dd.Next)
	assert.NotEmpty(t, dd.Records, "the run's own records follow the prior ones")
}

// BenchmarkDashboardHostileClients is the speed half of issue 43's
// hostile-clients check, which is no timed test: training steps per
// second of a one-rank job that logs every step to its live page, first
// with the page quiet, then with 5,000 hostile clients (those of
// TestDashboardHostileClients; the idle keep-alives, which notice when the
// page closes them, dial again a second later, so the pressure lasts),
// then quiet again. It reports both
// rates (quiet: the mean of the two quiet spans, which brackets the
// hostile one against drift) and the slowdown in percent; the issue asks
// for under 10. Each iteration is one epoch of 64 steps:
//
//	go test -run '^$' -bench DashboardHostileClients -benchtime 20x ./trainer/
func BenchmarkDashboardHostileClients(b *testing.B) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		b.Skipf("the hostile clients run on Linux: %v", err)
	}
	ctx := context.Background()
	pg := commtest.NewGroups(1)[0]
	rng := tensor.NewRNG(1)
	const width, batch, samples = 128, 32, 64 * 32
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, samples, width), tensor.Rand(rng, tensor.Float32, samples, width))
	require.NoError(b, err)
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
	require.NoError(b, err)
	loader, err := data.NewDataLoader(ds, data.BatchSize(batch), data.WithSampler(sampler))
	require.NoError(b, err)
	model, err := ddp.Wrap(ctx, nn.NewLinear(rng, width, width), pg)
	require.NoError(b, err)
	defer model.Close()
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.01})
	require.NoError(b, err)
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(b, err)
	defer d.Close()
	tr, err := New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: batch,
		Loss: mse, Out: io.Discard, Loggers: []Logger{d}, LogEvery: 1})
	require.NoError(b, err)
	defer tr.Close()

	epoch := 0
	stepsPerS := func(epochs int) float64 {
		start, steps := time.Now(), tr.Step()
		for range epochs {
			require.NoError(b, tr.RunEpoch(ctx, epoch))
			epoch++
		}
		return float64(tr.Step()-steps) / time.Since(start).Seconds()
	}
	stepsPerS(1) // warm-up: the allocator's caches, DDP's first iterations
	b.ResetTimer()
	quiet1 := stepsPerS(b.N)
	h := startHostile(b, d.ln.Addr().String(), hostileCount(b), time.Second)
	hostile := stepsPerS(b.N)
	h.stop()
	quiet2 := stepsPerS(b.N)
	b.StopTimer()
	quiet := (quiet1 + quiet2) / 2
	b.ReportMetric(quiet, "quiet-steps/s")
	b.ReportMetric(hostile, "hostile-steps/s")
	b.ReportMetric(100*(1-hostile/quiet), "slowdown-%")
	b.ReportMetric(float64(d.ln.refused.Load()), "refused-conns")
}

// discardResponse is an http.ResponseWriter that keeps nothing.
type discardResponse struct {
	h    http.Header
	n    int
	code int
}

func (w *discardResponse) Header() http.Header         { return w.h }
func (w *discardResponse) WriteHeader(code int)        { w.code = code }
func (w *discardResponse) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// data.json is encoded once per record and every answer is sliced from
// that one encoding: answering a long run's page allocates a few hundred
// bytes per request, not a copy of the records and their JSON (about
// 1 MB here), which a client that never read used to pin.
func TestDashboardDataSharesOneEncoding(t *testing.T) {
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	for _, r := range longRun(4000) {
		require.NoError(t, d.Log(r))
	}
	req, err := http.NewRequest("GET", "/data.json?since=0", nil)
	require.NoError(t, err)
	w := &discardResponse{h: http.Header{}}
	d.serveData(w, req)
	size := w.n
	require.Greater(t, size, 500_000, "a long run's data.json")
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		w.n = 0
		d.serveData(w, req)
	}
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("data.json of %d bytes: %d bytes allocated per request", size, perRequest)
	assert.Less(t, perRequest, uint64(16<<10))
}
