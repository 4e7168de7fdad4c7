package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// markerVar is set, with a value unique to each job, in the environment of
// ddprun; its workers inherit it, so /proc tells which processes belong to a
// job whatever their process group or parent.
const markerVar = "GODDP_E2E_JOB"

// spec describes one ddprun job of examples/linear.
type spec struct {
	nproc    int      // workers (default 2)
	launcher []string // extra ddprun flags, before PROGRAM
	args     []string // examples/linear flags
	env      []string // extra environment (GODDP_TIMEOUT=10s, ...)
	dir      string   // working directory (default a fresh temp dir)
	logDir   bool     // pass --log-dir (see job.workerLog)
	program  string   // what ddprun runs (default examples/linear)
}

// job is a running ddprun.
type job struct {
	t       *testing.T
	marker  string
	dir     string
	logDir  string
	cmd     *exec.Cmd
	stdout  *buffer
	stderr  *buffer
	started time.Time

	done  chan struct{}
	code  int
	ended time.Time

	mu   sync.Mutex
	seen map[int]bool // every worker pid seen, for the leftover check
}

// buffer is a goroutine-safe output sink.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts real multi-process jobs")
	}
}

// cleanEnv is this process's environment without goddp's and the launcher's
// variables, so a CI setting (GODDP_TIMEOUT, RANK...) cannot leak into a job.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GODDP_") || strings.HasPrefix(k, "TORCHELASTIC_") || strings.HasPrefix(k, "OMP_") ||
			slices.Contains([]string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TMPDIR"}, k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+tmpRoot, "GODDP_NUM_THREADS=1")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start runs ddprun --standalone on examples/linear. The job is killed, with
// every process carrying its marker, when the test ends.
func start(t *testing.T, sp spec) *job {
	t.Helper()
	if sp.nproc == 0 {
		sp.nproc = 2
	}
	j := &job{t: t, marker: randomHex(8), dir: sp.dir, stdout: &buffer{}, stderr: &buffer{},
		done: make(chan struct{}), seen: map[int]bool{}}
	if j.dir == "" {
		j.dir = t.TempDir()
	}
	args := []string{"--standalone", "--nproc-per-node", strconv.Itoa(sp.nproc)}
	if sp.logDir {
		j.logDir = filepath.Join(j.dir, "logs")
		args = append(args, "--log-dir", j.logDir, "--tee", "3")
	}
	if sp.program == "" {
		sp.program = linearBin
	}
	args = append(append(append(args, sp.launcher...), sp.program), sp.args...)
	j.cmd = exec.Command(ddprunBin, args...)
	j.cmd.Dir = j.dir
	j.cmd.Env = append(append(cleanEnv(), markerVar+"="+j.marker), sp.env...)
	j.cmd.Stdout, j.cmd.Stderr = j.stdout, j.stderr
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, j.cmd.Start())
	j.started = time.Now()
	tally.jobs.Add(1)
	go func() {
		err := j.cmd.Wait()
		j.ended = time.Now()
		j.code = 0
		if err != nil {
			j.code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				j.code = ee.ExitCode()
			}
		}
		close(j.done)
	}()
	t.Cleanup(j.kill)
	return j
}

// kill ends the job and every process that carries its marker.
func (j *job) kill() {
	select {
	case <-j.done:
	default:
		killGroup(j.cmd.Process.Pid)
		<-j.done
	}
	for _, p := range marked(j.marker) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// wait waits for ddprun to exit; past limit the job counts as hung, is
// killed and fails the test.
func (j *job) wait(limit time.Duration) (code int, took time.Duration) {
	j.t.Helper()
	select {
	case <-j.done:
		return j.code, j.ended.Sub(j.started)
	case <-time.After(limit - time.Since(j.started)):
		tally.hangs.Add(1)
		j.kill()
		j.t.Fatalf("HANG: ddprun still running after %v\nstdout (tail):\n%s\nstderr:\n%s", limit,
			tail(j.stdout.String(), 20), j.stderr.String())
		return -1, 0
	}
}

// waitOut waits until re matches the job's stdout (or stderr, with errStream)
// and returns the first match's submatches; it fails the test if the job ends
// first or limit passes.
func (j *job) waitOut(re *regexp.Regexp, limit time.Duration) []string {
	j.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if m := re.FindStringSubmatch(j.stdout.String()); m != nil {
			return m
		}
		select {
		case <-j.done:
			if m := re.FindStringSubmatch(j.stdout.String()); m != nil {
				return m
			}
			j.t.Fatalf("job ended (exit %d) before %q appeared\nstdout (tail):\n%s\nstderr:\n%s", j.code, re,
				tail(j.stdout.String(), 20), j.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("%q did not appear within %v\nstdout (tail):\n%s\nstderr:\n%s", re, limit,
				tail(j.stdout.String(), 20), j.stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitErr is waitOut on ddprun's stderr.
func (j *job) waitErr(re *regexp.Regexp, limit time.Duration) []string {
	j.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if m := re.FindStringSubmatch(j.stderr.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("%q did not appear on stderr within %v\nstderr:\n%s", re, limit, j.stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// proc is a live process of a job.
type proc struct {
	pid, rank, attempt int
	worker             bool // an examples/linear process (else ddprun)
}

// marked lists the live (non-zombie) processes whose environment carries
// marker.
func marked(marker string) []proc {
	ents, _ := os.ReadDir("/proc")
	var ps []proc
	want := markerVar + "=" + marker
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), want) || !alive(pid) {
			continue
		}
		p := proc{pid: pid, rank: -1}
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case "RANK":
				p.rank, _ = strconv.Atoi(v)
			case "TORCHELASTIC_RESTART_COUNT":
				p.attempt, _ = strconv.Atoi(v)
			}
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		p.worker = exe == linearBin
		ps = append(ps, p)
	}
	return ps
}

// procState is the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// pgid is the process group of pid (-1 when gone).
func pgid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return -1
	}
	g, _ := strconv.Atoi(f[2])
	return g
}

func alive(pid int) bool { s := procState(pid); return s != "" && s != "Z" && s != "X" }

// workers waits until the job's attempt has n live workers, and returns
// their pids by rank.
func (j *job) workers(n, attempt int, limit time.Duration) map[int]int {
	j.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := map[int]int{}
		for _, p := range marked(j.marker) {
			if p.worker && p.attempt == attempt {
				got[p.rank] = p.pid
			}
		}
		j.mu.Lock()
		for _, pid := range got {
			j.seen[pid] = true
		}
		j.mu.Unlock()
		if len(got) == n && hasRanks(got, n) {
			return got
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("attempt %d: %d of %d workers up after %v\nstderr:\n%s", attempt, len(got), n, limit, j.stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// hasRanks reports whether got holds ranks 0 to n-1 (a worker whose RANK
// could not be read counts as rank -1).
func hasRanks(got map[int]int, n int) bool {
	for r := range n {
		if got[r] <= 1 {
			return false
		}
	}
	return true
}

// leftovers lists processes still alive after the job ended: any carrying
// its marker, and any in the process group of a worker seen.
func (j *job) leftovers() []int {
	var left []int
	for _, p := range marked(j.marker) {
		left = append(left, p.pid)
	}
	j.mu.Lock()
	groups := map[int]bool{}
	for pid := range j.seen {
		groups[pid] = true // ddprun starts each worker in its own group
	}
	j.mu.Unlock()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && groups[pgid(pid)] && alive(pid) && !slices.Contains(left, pid) {
			left = append(left, pid)
		}
	}
	return left
}

// requireNoLeftovers asserts that nothing of the job survives it (allowing
// a moment for processes already dying).
func (j *job) requireNoLeftovers() {
	j.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(j.leftovers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Empty(j.t, j.leftovers(), "processes of the job outlived ddprun")
}

// inject sends sig to pid, counting the fault.
func (j *job) inject(pid int, sig syscall.Signal) {
	j.t.Helper()
	tally.faults.Add(1)
	signal(j.t, pid, sig)
}

// signal sends sig to the one process pid, and fails the test instead when
// pid could mean more than that process: kill(2) reads 0 as this process's
// own group, -1 as every process and 1 as init, and a pid of this test
// process or of its group would stop or kill the test run itself (go test
// and the script that started it share that group). A zero pid is what a
// map lookup of a rank that was never found returns.
func signal(t testing.TB, pid int, sig syscall.Signal) {
	t.Helper()
	self, _ := syscall.Getpgid(0)
	require.False(t, pid <= 1 || pid == os.Getpid() || pid == self,
		"refusing to send %v to pid %d: not one worker of the job (this test is pid %d, group %d)", sig, pid, os.Getpid(), self)
	require.NoError(t, syscall.Kill(pid, sig), "signal %v to %d", sig, pid)
}

// killGroup SIGKILLs the process group that the process leader leads (its
// pgid is its pid: started with Setpgid), never this test's own group.
func killGroup(leader int) {
	if self, _ := syscall.Getpgid(0); leader > 1 && leader != self {
		_ = syscall.Kill(-leader, syscall.SIGKILL)
	}
}

// waitStopped waits until pid is in the stopped state.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for procState(pid) != "T" {
		require.True(t, time.Now().Before(deadline), "process %d did not stop", pid)
		time.Sleep(time.Millisecond)
	}
}

// workerLog returns a worker's stdout.log or stderr.log of an attempt
// (requires spec.logDir).
func (j *job) workerLog(attempt, localRank int, stream string) string {
	j.t.Helper()
	matches, _ := filepath.Glob(filepath.Join(j.logDir, "*", fmt.Sprintf("attempt_%d", attempt), strconv.Itoa(localRank), stream+".log"))
	require.Len(j.t, matches, 1, "log %s of rank %d, attempt %d under %s", stream, localRank, attempt, j.logDir)
	b, err := os.ReadFile(matches[0])
	require.NoError(j.t, err)
	return string(b)
}

// storeAddr is the workers' store ddprun hosts, from its start line.
func (j *job) storeAddr() string {
	j.t.Helper()
	m := j.waitErr(regexp.MustCompile(`store (127\.0\.0\.1:\d+)\)`), 30*time.Second)
	return m[1]
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// epochLine matches rank 0's per-epoch line for epoch n (the tutorial's
// format; --tee prefixes it with [rank0]:).
func epochLine(n int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`\[cpu0\] Epoch %d \| Batchsize: \d+ \| Steps: \d+`, n))
}

// worker is an examples/linear process started without ddprun, with the
// environment torchrun gives (rank 0 then hosts the store itself).
type worker struct {
	rank   int
	cmd    *exec.Cmd
	stdout *buffer
	stderr *buffer
	done   chan struct{}
	code   int
	ended  time.Time
}

// startWorkers starts n linear processes on loopback that form one group.
func startWorkers(t *testing.T, n int, env []string, args ...string) []*worker {
	t.Helper()
	return startProgram(t, linearBin, n, env, args...)
}

// startProgram starts n processes of bin on loopback that form one group.
func startProgram(t *testing.T, bin string, n int, env []string, args ...string) []*worker {
	t.Helper()
	port := freePort(t)
	marker := randomHex(8)
	dir := t.TempDir()
	ws := make([]*worker, n)
	for r := range ws {
		w := &worker{rank: r, stdout: &buffer{}, stderr: &buffer{}, done: make(chan struct{})}
		w.cmd = exec.Command(bin, args...)
		w.cmd.Dir = dir
		w.cmd.Env = append(append(cleanEnv(), markerVar+"="+marker,
			"RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port)), env...)
		w.cmd.Stdout, w.cmd.Stderr = w.stdout, w.stderr
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		require.NoError(t, w.cmd.Start())
		tally.jobs.Add(1)
		go func() {
			err := w.cmd.Wait()
			w.ended = time.Now()
			if ee, ok := err.(*exec.ExitError); ok {
				w.code = ee.ExitCode()
			} else if err != nil {
				w.code = -1
			}
			close(w.done)
		}()
		ws[r] = w
	}
	t.Cleanup(func() {
		for _, w := range ws {
			select {
			case <-w.done:
			default:
				killGroup(w.cmd.Process.Pid)
				<-w.done
			}
		}
	})
	return ws
}

// wait waits for the worker to exit, failing the test as a hang past limit
// (measured from since).
func (w *worker) wait(t *testing.T, since time.Time, limit time.Duration) (code int, took time.Duration) {
	t.Helper()
	select {
	case <-w.done:
		return w.code, w.ended.Sub(since)
	case <-time.After(time.Until(since.Add(limit))):
		tally.hangs.Add(1)
		killGroup(w.cmd.Process.Pid)
		<-w.done
		t.Fatalf("HANG: rank %d still running %v after the fault\nstderr:\n%s", w.rank, limit, w.stderr.String())
		return -1, 0
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var built struct {
	sync.Mutex
	bins map[string]string
}

// buildProgram builds the Go package pkg (relative to e2e/) once per test
// binary and returns the executable's path.
func buildProgram(t *testing.T, pkg string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bins[pkg]; ok {
		return bin
	}
	bin := filepath.Join(filepath.Dir(tmpRoot), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	require.NoError(t, err, "building %s: %s", pkg, out)
	if built.bins == nil {
		built.bins = map[string]string{}
	}
	built.bins[pkg] = bin
	return bin
}
