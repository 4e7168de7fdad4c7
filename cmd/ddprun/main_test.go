package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/launch"
)

// The test binary doubles as ddprun: with DDPRUN_TEST_MAIN=1 it runs main's
// logic on its arguments, so the tests exercise the real command (flags,
// signals, exit codes) without building it.
const asMain = "DDPRUN_TEST_MAIN"

var (
	self   string // this test binary
	worker string // testdata/launch/worker, built by TestMain
	tmpDir string // TMPDIR of every ddprun started: a killed one cannot clean up
	// cacheEnv keeps ddprun's build cache in the test's dir, and the go
	// command on the user's build cache, which XDG_CACHE_HOME would move.
	cacheEnv []string
)

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(ddprun(os.Args[1:], os.Stdout, os.Stderr))
	}
	var err error
	if self, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "ddprun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	worker = filepath.Join(dir, "worker")
	tmpDir = filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmpDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if out, err := exec.Command("go", "build", "-o", worker, "../../testdata/launch/worker").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test worker: %v\n%s", err, out)
		os.Exit(1)
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go env GOCACHE: %v\n", err)
		os.Exit(1)
	}
	cacheEnv = []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "GOCACHE=" + strings.TrimSpace(string(gocache))}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// ddprunCmd is a ddprun process; prefix (e.g. ip netns exec NS) goes first.
func ddprunCmd(prefix []string, env []string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, prefix...), self), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(append(os.Environ(), asMain+"=1", "TMPDIR="+tmpDir), cacheEnv...), env...)
	return cmd
}

// result of one ddprun run.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func runDdprun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := ddprunCmd(nil, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String(), time.Since(start)}
}

type report map[string]any

func (r report) str(k string) string { s, _ := r[k].(string); return s }
func (r report) pid() int            { f, _ := r["pid"].(float64); return int(f) }

func reports(out, event string) []report {
	var rs []report
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "WORKER ")
		if i < 0 {
			continue
		}
		var r report
		if json.Unmarshal([]byte(line[i+7:]), &r) == nil && (event == "" || r.str("event") == event) {
			rs = append(rs, r)
		}
	}
	return rs
}

func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitDead(t *testing.T, pids []int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.False(t, alive(pid), "process %d is still alive", pid)
	}
}

// TestStandaloneEnv is the first bar.
func TestStandaloneEnv(t *testing.T) {
	r := runDdprun(t, nil, "--standalone", "--nproc-per-node", "3", worker, "-mode", "store", "-code", "0")
	require.Equal(t, 0, r.code, r.stderr)
	rs := reports(r.stdout, "start")
	require.Len(t, rs, 3, r.stdout)
	ranks := map[string]bool{}
	for _, w := range rs {
		ranks[w.str("RANK")] = true
		assert.Equal(t, w.str("RANK"), w.str("LOCAL_RANK"))
		assert.Equal(t, "3", w.str("WORLD_SIZE"))
		assert.Equal(t, "3", w.str("LOCAL_WORLD_SIZE"))
		assert.Equal(t, "127.0.0.1", w.str("MASTER_ADDR"))
		assert.Equal(t, rs[0].str("MASTER_PORT"), w.str("MASTER_PORT"))
		assert.NotEqual(t, "29500", w.str("MASTER_PORT"), "--standalone picks a free port")
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true}, ranks)
	assert.Len(t, reports(r.stdout, "store-ok"), 3, "every worker reached the hosted store with the job token")
}

// TestStandaloneAllReduce: the workers join a process group through the
// store ddprun hosts (comm.InitFromEnv) and all-reduce.
func TestStandaloneAllReduce(t *testing.T) {
	r := runDdprun(t, nil, "--standalone", "--nproc-per-node", "3", worker, "-mode", "allreduce")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, reports(r.stdout, "allreduce-ok"), 3)
}

// TestWorkerExit3 is the second bar.
func TestWorkerExit3(t *testing.T) {
	r := runDdprun(t, nil, "--standalone", "--nproc-per-node", "3", "--grace-period", "2",
		worker, "-mode", "child", "-fail-rank", "1", "-code", "3", "-delay", "500ms")
	assert.Equal(t, launch.ExitWorkerFailed, r.code)
	assert.Less(t, r.took, 10*time.Second)
	assert.Contains(t, r.stderr, "worker: rank 1") // the worker's own stderr, passed through
	assert.Contains(t, r.stderr, "Root cause")
	assert.Contains(t, r.stderr, "rank       : 1 (local rank 1")
	assert.Contains(t, r.stderr, "exit code 3")
	var pids []int
	for _, w := range reports(r.stdout, "start") {
		pids = append(pids, w.pid())
	}
	for _, w := range reports(r.stdout, "child") {
		pids = append(pids, int(w["child_pid"].(float64)))
	}
	require.Len(t, pids, 6)
	waitDead(t, pids, 0)
}

func TestExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	free := freePort(t)

	tests := []struct {
		name string
		env  []string
		args []string
		code int
		msg  string
	}{
		{"ok", nil, []string{"--nproc-per-node", "2", "--master-port", free, worker}, launch.ExitOK, ""},
		{"help", nil, []string{"--help"}, launch.ExitOK, ""},
		{"unknown flag", nil, []string{"--nprocs", "2", worker}, launch.ExitUsage, "unknown flag --nprocs"},
		{"nproc 0", nil, []string{"--nproc-per-node", "0", worker}, launch.ExitUsage, "--nproc-per-node must be at least 1"},
		{"node rank >= nnodes", nil, []string{"--nnodes", "2", "--node-rank", "2", worker}, launch.ExitUsage, "--node-rank 2 must be less than --nnodes 2"},
		{"no program", nil, []string{"--standalone"}, launch.ExitUsage, "missing PROGRAM"},
		{"missing program", nil, []string{"--standalone", "./no/such/prog"}, launch.ExitProgram, "no such file"},
		{"does not build", nil, []string{"--standalone", "../../testdata/launch/broken"}, launch.ExitProgram, "does not build"},
		{"port in use", nil, []string{"--master-port", busyPort, worker}, launch.ExitRendezvous, "127.0.0.1:" + busyPort},
		{"node never arrives", []string{"GODDP_TOKEN=t0k-0123456789abcdef"}, []string{"--nnodes", "2", "--node-rank", "0", "--master-port", free,
			"--rdzv-timeout", "1", worker}, launch.ExitRendezvous, "node rank(s) 1 never arrived"},
		{"worker fails", nil, []string{"--standalone", worker, "-mode", "fail", "-delay", "0s"}, launch.ExitWorkerFailed, "failed with exit code 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runDdprun(t, tc.env, tc.args...)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.msg)
			if tc.code == launch.ExitUsage {
				assert.Contains(t, r.stderr, "ddprun: error: ")
			}
		})
	}
	t.Run("build error shows the compiler", func(t *testing.T) {
		r := runDdprun(t, nil, "--standalone", "../../testdata/launch/broken")
		assert.Contains(t, r.stderr, "main.go")
	})
	t.Run("help lists exit codes", func(t *testing.T) {
		r := runDdprun(t, nil, "-h")
		assert.Contains(t, r.stdout, "exit codes")
		assert.Contains(t, r.stdout, "--nproc-per-node")
	})
}

func TestRequireGPU(t *testing.T) {
	if n, err := launch.GPUCount(); err == nil && n > 0 {
		t.Skip("this machine has a GPU")
	}
	for _, args := range [][]string{
		{"--standalone", "--require-gpu", worker},
		{"--nproc-per-node", "gpu", worker},
	} {
		r := runDdprun(t, nil, args...)
		assert.Equal(t, launch.ExitNoGPU, r.code, r.stderr)
		assert.Contains(t, r.stderr, "no GPU")
	}
	r := runDdprun(t, []string{"GODDP_REQUIRES_GPU=1"}, "--standalone", worker)
	assert.Equal(t, launch.ExitNoGPU, r.code, r.stderr)
}

// startDdprun starts ddprun and waits until n workers have reported.
func startDdprun(t *testing.T, prefix, env []string, n int, args ...string) (*exec.Cmd, *lines, *lines) {
	t.Helper()
	cmd := ddprunCmd(prefix, env, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errb := &lines{}
	cmd.Stderr = errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	out := &lines{eof: make(chan struct{})}
	go func() {
		defer close(out.eof)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = out.Write([]byte(sc.Text() + "\n"))
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(reports(out.String(), "start")) < n {
		if time.Now().After(deadline) {
			t.Fatalf("workers did not start; stderr:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, out, errb
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
	// eof, when set, is closed once the reader has seen the end of the
	// stream. exec.Cmd.Wait closes a StdoutPipe as soon as the process
	// exits, so a test that needs every line waits for eof before Wait.
	eof chan struct{}
}

// drained waits (up to 10 s) until the reader has read the whole stream.
func (l *lines) drained(t *testing.T) {
	t.Helper()
	select {
	case <-l.eof:
	case <-time.After(10 * time.Second):
		t.Fatal("ddprun's stdout did not end")
	}
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *lines) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestSignalsForwarded(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGTERM, 143},
		{syscall.SIGINT, 130},
	}
	for _, tc := range tests {
		t.Run(tc.sig.String(), func(t *testing.T) {
			cmd, out, _ := startDdprun(t, nil, nil, 2, "--standalone", "--nproc-per-node", "2", worker, "-mode", "sleep")
			require.NoError(t, cmd.Process.Signal(tc.sig))
			out.drained(t) // before Wait, which would close the pipe under the reader
			err := cmd.Wait()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tc.code, ee.ExitCode())
			got := reports(out.String(), "signal")
			require.Len(t, got, 2, out.String())
			for _, r := range got {
				assert.Equal(t, tc.sig.String(), r.str("signal"))
			}
			var pids []int
			for _, r := range reports(out.String(), "start") {
				pids = append(pids, r.pid())
			}
			waitDead(t, pids, 0)
		})
	}
}

// TestKill9Worker: a worker killed with SIGKILL mid-run ends the job with
// exit 1, naming the rank and the signal (issue 8's bar, with a sleeping
// worker in place of a training loop).
func TestKill9Worker(t *testing.T) {
	cmd, out, errb := startDdprun(t, nil, nil, 2, "--standalone", "--nproc-per-node", "2", worker, "-mode", "sleep")
	var victim report
	for _, r := range reports(out.String(), "start") {
		if r.str("RANK") == "1" {
			victim = r
		}
	}
	require.NotNil(t, victim)
	// kill(2) reads pid 0 as this test's own process group (go test's too).
	require.Greater(t, victim.pid(), 1, "rank 1's start report carries its pid")
	start := time.Now()
	require.NoError(t, syscall.Kill(victim.pid(), syscall.SIGKILL))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, launch.ExitWorkerFailed, ee.ExitCode())
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, errb.String(), "rank 1 (local rank 1")
	assert.Contains(t, errb.String(), "signal SIGKILL")
	var pids []int
	for _, r := range reports(out.String(), "start") {
		pids = append(pids, r.pid())
	}
	waitDead(t, pids, 0)
}

// TestKill9Launcher: a launcher killed with SIGKILL cannot stop anything,
// so the workers must die by themselves (Pdeathsig), and it cannot remove
// its temp log dir, so the next launcher does (issue 24's item 7).
func TestKill9Launcher(t *testing.T) {
	before, err := filepath.Glob(filepath.Join(tmpDir, "ddprun-*"))
	require.NoError(t, err)
	cmd, out, _ := startDdprun(t, nil, nil, 2, "--standalone", "--nproc-per-node", "2", worker, "-mode", "sleep")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	var pids []int
	for _, r := range reports(out.String(), "start") {
		pids = append(pids, r.pid())
	}
	waitDead(t, pids, 5*time.Second)

	left, err := filepath.Glob(filepath.Join(tmpDir, "ddprun-*"))
	require.NoError(t, err)
	require.Greater(t, len(left), len(before), "the killed launcher's temp dir")
	r := runDdprun(t, nil, "--standalone", "--nproc-per-node", "1", worker)
	require.Equal(t, launch.ExitOK, r.code, r.stderr)
	for _, d := range left {
		if !slices.Contains(before, d) {
			assert.NoDirExists(t, d, "left by the killed launcher, and still there after the next run")
		}
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
