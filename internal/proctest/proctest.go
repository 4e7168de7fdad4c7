// Package proctest is the one harness for multi-process tests: a test
// re-runs its own binary as N rank processes on loopback, hands them a
// rendezvous store, collects their output, and stops them all when one
// fails or the time runs out.
//
// A test binary that spawns workers dispatches in TestMain:
//
//	func TestMain(m *testing.M) {
//		proctest.Main(m, map[string]func() error{"cases": casesWorker})
//	}
//
// and a test starts a world:
//
//	w := proctest.Start(t, proctest.Options{Worker: "cases", World: 3})
//	for _, r := range w.Wait() { require.Zero(t, r.Code, "rank %d:\n%s", r.Rank, r.Output()) }
//
// Each rank gets the variables a launcher sets (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the job token
// and GODDP_STORE_HOSTED=1: the store is hosted by the test process
// itself, so no rank races for a port, and comm.InitFromEnv just works in
// the worker.
package proctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/comm/store"
)

// WorkerEnv names the worker a spawned process runs; Main dispatches on it.
const WorkerEnv = "GODDP_PROCTEST_WORKER"

// Token is the job token the harness's store and ranks share.
const Token = "proctest-token-0123456789"

// Main runs the worker named by WorkerEnv and exits (0 on success, 3 with
// the error on stderr on failure, 2 for an unknown name); without it, it
// runs the tests.
func Main(m *testing.M, workers map[string]func() error) {
	MainFunc(m, func(name string) error {
		fn := workers[name]
		if fn == nil {
			fmt.Fprintf(os.Stderr, "proctest: unknown worker %q\n", name)
			os.Exit(2)
		}
		return fn()
	})
}

// MainFunc is Main for workers named by a scenario string ("equiv:x"):
// run gets the name.
func MainFunc(m *testing.M, run func(name string) error) {
	if name := os.Getenv(WorkerEnv); name != "" {
		if err := run(name); err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: worker %s: %v\n", os.Getenv("RANK"), name, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Options describe a world of rank processes.
type Options struct {
	Worker string // the name Main dispatches on
	World  int
	// Timeout bounds the whole run: past it every rank is killed and the
	// test fails with each rank's output. Default 2 minutes.
	Timeout time.Duration
	Env     []string                // extra variables for every rank
	RankEnv func(rank int) []string // extra variables per rank
	// Args replace the default arguments (-test.run=^$, so a worker runs
	// no test); set them to run a test function as the worker.
	Args []string
	// KeepGoing leaves the other ranks running when one fails (a test that
	// kills a rank on purpose); by default the first failure stops all.
	KeepGoing bool
	// NoStore skips the hosted store (workers that bring their own).
	NoStore bool
}

// Proc is one rank process.
type Proc struct {
	Rank           int
	Cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	result         Result
}

// Stdout and Stderr are what the rank has printed so far.
func (p *Proc) Stdout() string { return p.stdout.String() }
func (p *Proc) Stderr() string { return p.stderr.String() }

// Signal sends sig to the rank.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Result is how a rank ended.
type Result struct {
	Rank int
	// Code is the exit status, or minus the signal that killed the rank.
	Code           int
	Stdout, Stderr string
	Err            error // the wait error, nil on exit 0
	Stopped        bool  // killed by the harness after another rank failed
}

// Output is the rank's stdout and stderr, for failure messages.
func (r Result) Output() string { return "stdout:\n" + r.Stdout + "\nstderr:\n" + r.Stderr }

// World is a running set of ranks.
type World struct {
	t     testing.TB
	opts  Options
	Procs []*Proc
	Store *store.Server // the hosted store, nil with NoStore
	// Dir is a temporary directory the ranks share (GODDP_PROCTEST_DIR).
	Dir    string
	ctx    context.Context
	cancel context.CancelFunc
	stop   sync.Once
	failed chan struct{}
	first  int // the rank whose failure stopped the others, -1 if none
}

// Start launches the world; Cleanup kills whatever is still running.
func Start(t testing.TB, o Options) *World {
	t.Helper()
	if o.World < 1 {
		t.Fatalf("proctest: world %d", o.World)
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	w := &World{t: t, opts: o, Dir: t.TempDir(), failed: make(chan struct{}), first: -1}
	w.ctx, w.cancel = context.WithTimeout(context.Background(), o.Timeout)
	env := append(os.Environ(), WorkerEnv+"="+o.Worker, "WORLD_SIZE="+strconv.Itoa(o.World),
		"LOCAL_WORLD_SIZE="+strconv.Itoa(o.World), "GODDP_PROCTEST_DIR="+w.Dir)
	if !o.NoStore {
		srv, err := store.Listen(w.ctx, "127.0.0.1:0", store.WithToken(Token))
		if err != nil {
			t.Fatalf("proctest: host the store: %v", err)
		}
		w.Store = srv
		host, port, _ := net.SplitHostPort(srv.Addr())
		env = append(env, "MASTER_ADDR="+host, "MASTER_PORT="+port, "GODDP_STORE_HOSTED=1", "GODDP_TOKEN="+Token)
	}
	env = append(env, o.Env...)
	args := o.Args
	if args == nil {
		args = []string{"-test.run=^$"}
	}
	t.Cleanup(w.close)
	for r := range o.World {
		p := &Proc{Rank: r, done: make(chan struct{})}
		p.Cmd = exec.Command(os.Args[0], args...)
		p.Cmd.Env = append(append([]string{}, env...), "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r))
		if o.RankEnv != nil {
			p.Cmd.Env = append(p.Cmd.Env, o.RankEnv(r)...)
		}
		p.Cmd.Stdout, p.Cmd.Stderr = &p.stdout, &p.stderr
		if err := p.Cmd.Start(); err != nil {
			t.Fatalf("proctest: start rank %d: %v", r, err)
		}
		w.Procs = append(w.Procs, p)
		go w.reap(p)
	}
	go w.watch()
	return w
}

// reap waits for one rank and records how it ended.
func (w *World) reap(p *Proc) {
	err := p.Cmd.Wait()
	res := Result{Rank: p.Rank, Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.Code = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			res.Code = -int(st.Signal())
		}
	} else if err != nil {
		res.Code = -1
	}
	res.Stdout, res.Stderr = p.Stdout(), p.Stderr()
	p.result = res
	if res.Code != 0 && !w.opts.KeepGoing {
		w.stop.Do(func() {
			w.first = p.Rank
			close(w.failed)
		})
	}
	close(p.done)
}

// watch kills every rank on the first failure (unless KeepGoing) or when
// the time is up.
func (w *World) watch() {
	select {
	case <-w.failed:
	case <-w.ctx.Done():
	}
	for _, p := range w.Procs {
		select {
		case <-p.done:
		default:
			p.Cmd.Process.Kill()
		}
	}
}

// Wait waits for every rank and returns their results in rank order. When
// the timeout passes first it kills them all and fails the test with every
// rank's output.
func (w *World) Wait() []Result {
	w.t.Helper()
	for _, p := range w.Procs {
		<-p.done
	}
	timedOut := w.ctx.Err() != nil
	res := make([]Result, len(w.Procs))
	for i, p := range w.Procs {
		res[i] = p.result
		// Ranks the harness killed after the first failure.
		res[i].Stopped = w.first >= 0 && i != w.first && res[i].Code == -int(syscall.SIGKILL)
	}
	if timedOut {
		var b strings.Builder
		for _, r := range res {
			fmt.Fprintf(&b, "rank %d (exit %d):\n%s\n", r.Rank, r.Code, r.Output())
		}
		w.t.Fatalf("proctest: %s: ranks still running after %v (a hang), killed:\n%s", w.opts.Worker, w.opts.Timeout, b.String())
	}
	return res
}

// Run starts the world and waits for it.
func Run(t testing.TB, o Options) []Result {
	t.Helper()
	return Start(t, o).Wait()
}

// RequireSuccess fails the test unless every rank exited 0, showing the
// output of each rank that did not.
func RequireSuccess(t testing.TB, res []Result) {
	t.Helper()
	failed := false
	for _, r := range res {
		failed = failed || r.Code != 0
	}
	if !failed {
		return
	}
	// Every rank's output, those that exited 0 too: a rank that failed
	// because a peer closed the group says little; the peer's own output
	// says why it closed (a CI flake showed only the first).
	var b strings.Builder
	for _, r := range res {
		fmt.Fprintf(&b, "rank %d exited %d%s:\n%s\n", r.Rank, r.Code, map[bool]string{true: " (stopped after another rank failed)"}[r.Stopped], r.Output())
	}
	t.Fatalf("proctest: ranks failed:\n%s", b.String())
}

func (w *World) close() {
	w.stop.Do(func() { close(w.failed) })
	for _, p := range w.Procs {
		<-p.done
	}
	w.cancel()
	if w.Store != nil {
		w.Store.Close()
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
