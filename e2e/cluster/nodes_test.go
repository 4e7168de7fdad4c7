package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// nodes are two "machines" on this host: network namespaces joined by a veth
// pair (10.97.0.1 and 10.97.0.2), each entered with its own UTS host name.
// The approach is cmd/ddprun/netns_test.go's, plus the host names: Slurm and
// OpenMPI both name nodes by host name, and so does comm's placement.
type nodes struct {
	name [2]string // host names: node0, node1
	ns   [2]string
	addr [2]string
}

var nodesSeq atomic.Int32

// requireRoot skips the test when it cannot make namespaces or run daemons.
func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster: starts real daemons and multi-node jobs")
	}
	if os.Geteuid() != 0 {
		t.Skip("cluster: needs root: it makes network namespaces and runs daemons (slurmd, orted) in them")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("cluster: the ip command (iproute2) is not installed")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("cluster: the unshare command (util-linux) is not installed")
	}
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newNodes makes the two nodes; they and everything left running in them
// are removed when the test ends.
func newNodes(t *testing.T) *nodes {
	t.Helper()
	requireRoot(t)
	sweepStale()
	id := fmt.Sprintf("%d_%d", os.Getpid(), nodesSeq.Add(1))
	n := &nodes{
		name: [2]string{"node0", "node1"},
		ns:   [2]string{"gdcl" + id + "_0", "gdcl" + id + "_1"},
		addr: [2]string{"10.97.0.1", "10.97.0.2"},
	}
	// Interface names have at most 15 bytes.
	veth := [2]string{fmt.Sprintf("gc%s0", id), fmt.Sprintf("gc%s1", id)}
	if err := ipCmd("netns", "add", n.ns[0]); err != nil {
		t.Skipf("cluster: cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() { n.cleanup(t) })
	steps := [][]string{
		{"netns", "add", n.ns[1]},
		{"link", "add", veth[0], "type", "veth", "peer", "name", veth[1]},
	}
	for i := range 2 {
		steps = append(steps,
			[]string{"link", "set", veth[i], "netns", n.ns[i]},
			[]string{"-n", n.ns[i], "addr", "add", n.addr[i] + "/24", "dev", veth[i]},
			[]string{"-n", n.ns[i], "link", "set", veth[i], "up"},
			[]string{"-n", n.ns[i], "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			t.Fatalf("cluster: setting up the namespaces: %v", err)
		}
	}
	// `ip netns exec NS` bind-mounts /etc/netns/NS/* over /etc, so each node
	// resolves both host names as a cluster's DNS would, and the host's
	// /etc/hosts is untouched.
	hosts := "127.0.0.1 localhost\n::1 localhost\n"
	for i := range 2 {
		hosts += n.addr[i] + " " + n.name[i] + "\n"
	}
	for _, ns := range n.ns {
		dir := filepath.Join("/etc/netns", ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("cluster: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	return n
}

// enter is the command prefix that runs a program on node i: in its
// namespace, under its host name. With cgroupFS, the program also gets a
// private mount namespace with an empty tmpfs on /sys/fs/cgroup (see
// startSlurm).
func (n *nodes) enter(i int, cgroupFS bool) []string {
	unshare := []string{"unshare", "--uts"}
	script := `hostname "$0" && exec "$@"`
	if cgroupFS {
		unshare = append(unshare, "--mount")
		script = `mount -t tmpfs goddp-cgroup /sys/fs/cgroup && ` + script
	}
	return append(append([]string{"ip", "netns", "exec", n.ns[i]}, unshare...), "sh", "-c", script, n.name[i])
}

// command runs name on node i with env as its whole environment.
func (n *nodes) command(i int, env []string, name string, args ...string) *exec.Cmd {
	argv := append(append(n.enter(i, false), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return cmd
}

// sweepStale deletes namespaces (and their hosts files) left by an earlier
// test process that was killed before its cleanup ran (their names carry
// its pid).
func sweepStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		var pid, seq, idx int
		if n, _ := fmt.Sscanf(name, "gdcl%d_%d_%d", &pid, &seq, &idx); n == 3 && syscall.Kill(pid, 0) != nil {
			killNamespace(name)
			_ = exec.Command("ip", "netns", "del", name).Run()
			_ = os.RemoveAll(filepath.Join("/etc/netns", name))
		}
	}
}

// killNamespace SIGKILLs every process in the namespace and returns their pids.
func killNamespace(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return pids
}

func (n *nodes) cleanup(t *testing.T) {
	for _, ns := range n.ns {
		killNamespace(ns)
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = os.RemoveAll(filepath.Join("/etc/netns", ns))
	}
}

// buffer is a goroutine-safe output sink.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// jobEnv is this process's environment without any launcher's or goddp's
// variables (a CI setting must not leak into a job), with binDir first on
// PATH, one BLAS thread per rank (4 ranks share 2 cores) and the job token
// that comm requires beyond loopback.
func jobEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GODDP_"), strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "OMPI_"),
			strings.HasPrefix(k, "PMI"), strings.HasPrefix(k, "TORCHELASTIC_"), strings.HasPrefix(k, "OMP_"),
			slices.Contains([]string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PATH"}, k):
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+binDir+":"+os.Getenv("PATH"), "GODDP_NUM_THREADS=1",
		"GODDP_TOKEN=cluster-test-token-"+strconv.Itoa(os.Getpid()))
	return append(env, extra...)
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs cmd to the end, or kills it after limit and fails the test.
func run(t *testing.T, cmd *exec.Cmd, limit time.Duration) result {
	t.Helper()
	var out, errb buffer
	// A caller that watches the output as it comes sets cmd.Stdout.
	if cmd.Stdout != nil {
		cmd.Stdout = io.MultiWriter(&out, cmd.Stdout)
	} else {
		cmd.Stdout = &out
	}
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("HANG: %s still running after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), limit, out.String(), errb.String())
	}
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cluster: %s: %v", strings.Join(cmd.Args, " "), err)
	}
	return r
}

// tasks lists the pids of running processes whose executable is bin.
func tasks(bin string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}

// environ is the value of key in process pid's initial environment.
func environ(pid int, key string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// requireNoTasks fails the test if a process of bin still runs after limit.
func requireNoTasks(t *testing.T, bin string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := tasks(bin)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v of %s were left running", left, bin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
