package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/netcluster"
)

// The cluster of issue 30: 4 nodes of 2 ranks, 1 Gbit/s links with 50 µs
// of delay (the delay only where the kernel has sch_netem).
const (
	nodes   = 4
	perNode = 2
)

func newCluster(t *testing.T) *netcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("scale: makes network namespaces and runs 8-rank jobs")
	}
	c, err := netcluster.New(netcluster.Config{Nodes: nodes, Rate: "1gbit", Delay: 50 * time.Microsecond})
	if errors.Is(err, netcluster.ErrUnavailable) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	t.Logf("cluster: %s", c.Shaping)
	return c
}

// jobEnv is this process's environment without any launcher's or goddp's
// variables, with one BLAS thread per rank (8 ranks share 2 cores) and
// the job token comm requires beyond loopback.
func jobEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GODDP_"), strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "OMPI_"),
			strings.HasPrefix(k, "PMI"), strings.HasPrefix(k, "TORCHELASTIC_"),
			slices.Contains([]string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}, k):
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GODDP_NUM_THREADS=1", "GODDP_TOKEN=scale-test-token-"+strconv.Itoa(os.Getpid()))
	return append(env, extra...)
}

// syncBuf is a goroutine-safe output sink.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *syncBuf) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// runAll runs the commands (each in a process group of its own, which
// netcluster.Command and local set up) to the end, or kills their groups
// after limit and fails the test. It returns each one's output.
func runAll(t *testing.T, limit time.Duration, cmds ...*exec.Cmd) []string {
	t.Helper()
	outs := make([]*syncBuf, len(cmds))
	errs := make(chan error, len(cmds))
	for i, cmd := range cmds {
		outs[i] = &syncBuf{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		cmd.WaitDelay = 5 * time.Second // workers that outlive a killed ddprun hold the pipe
		require.NoError(t, cmd.Start())
		go func() { errs <- cmd.Wait() }()
	}
	kill := func() {
		for _, cmd := range cmds {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var failed []string
	for range cmds {
		select {
		case err := <-errs:
			if err != nil {
				failed = append(failed, err.Error())
				kill()
			}
		case <-ctx.Done():
			kill()
			failed = append(failed, "HANG: still running after "+limit.String())
			<-errs
		}
	}
	var text []string
	for _, o := range outs {
		text = append(text, o.String())
	}
	if len(failed) > 0 {
		t.Fatalf("%s\n%s", strings.Join(failed, "; "), strings.Join(text, "\n----\n"))
	}
	return text
}

// onCluster runs `ddprun ... prog args` on every node: one job of 8 ranks.
func onCluster(t *testing.T, c *netcluster.Cluster, env []string, port int, prog string, args ...string) []string {
	t.Helper()
	var cmds []*exec.Cmd
	for i := range c.Nodes {
		cmds = append(cmds, c.Command(i, env, filepath.Join(binDir, "ddprun"),
			append([]string{"--nnodes", strconv.Itoa(nodes), "--node-rank", strconv.Itoa(i),
				"--master-addr", c.Nodes[0].Name, "--master-port", strconv.Itoa(port),
				"--nproc-per-node", strconv.Itoa(perNode), filepath.Join(binDir, prog)}, args...)...))
	}
	return runAll(t, 2*time.Minute, cmds...)
}

// onHost runs `ddprun --standalone --nproc-per-node 8 prog args` here.
func onHost(t *testing.T, env []string, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "ddprun"),
		append([]string{"--standalone", "--nproc-per-node", strconv.Itoa(nodes * perNode), filepath.Join(binDir, prog)}, args...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return runAll(t, 2*time.Minute, cmd)[0]
}

var probeLine = regexp.MustCompile(`rank=(\d+) backend=(\S+) op=(\S+) hash=(\S+) sum=(\S+)`)

type probed struct {
	backend, hash string
	sum           float64
}

// probes maps op -> rank -> result from hierprobe's output.
func probes(t *testing.T, outs []string) map[string]map[int]probed {
	t.Helper()
	res := map[string]map[int]probed{}
	for _, out := range outs {
		for _, m := range probeLine.FindAllStringSubmatch(out, -1) {
			r, _ := strconv.Atoi(m[1])
			s, _ := strconv.ParseFloat(m[5], 64)
			if res[m[3]] == nil {
				res[m[3]] = map[int]probed{}
			}
			res[m[3]][r] = probed{m[2], m[4], s}
		}
	}
	return res
}

// On the cluster "auto" picks hier; its results are the same bits on
// every rank, and the flat tcp backend's on exact inputs.
func TestHierMatchesFlat(t *testing.T) {
	c := newCluster(t)
	start := time.Now()
	hier := probes(t, onCluster(t, c, jobEnv(), 29600, "hierprobe"))
	flat := probes(t, onCluster(t, c, jobEnv("GODDP_BACKEND=tcp"), 29601, "hierprobe"))
	t.Logf("two 8-rank probe jobs: %v", time.Since(start).Round(time.Millisecond))
	require.NotEmpty(t, hier)
	for op, ranks := range hier {
		require.Len(t, ranks, nodes*perNode, op)
		for r, p := range ranks {
			require.Equal(t, "hier", p.backend, "auto on 4 hosts of 2 ranks")
			f := flat[op][r]
			require.Equal(t, "tcp", f.backend)
			if op == "allreduce-avg-random" {
				// A different order of summation: equal up to rounding.
				assert.InDelta(t, f.sum, p.sum, 1e-3, "rank %d: %s", r, op)
			} else {
				assert.Equal(t, f.hash, p.hash, "rank %d: %s differs from tcp's", r, op)
			}
			if !strings.HasPrefix(op, "reducescatter") {
				assert.Equal(t, ranks[0].hash, p.hash, "rank %d: %s differs from rank 0's", r, op)
			}
		}
	}
}

var epochLine = regexp.MustCompile(`(?m)^epoch=\d+ loss=\S+$`)

// trainLosses are the losses of the train records of a -metrics file.
func trainLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var ls []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
		if l, ok := rec["loss"].(float64); ok {
			ls = append(ls, l)
		}
	}
	return ls
}

// examples/mlp at world 8 across the 4 nodes (auto: hier) trains as it
// does on one host (shm): the same per-epoch losses, and every logged
// step's loss within 1e-5.
func TestMLPAcrossNodes(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	const epochs = "2"
	local := onHost(t, jobEnv(), "mlp", "-epochs", epochs, "-metrics", filepath.Join(dir, "host.jsonl"), "-metrics-every", "1")
	start := time.Now()
	outs := onCluster(t, c, jobEnv(), 29602, "mlp", "-epochs", epochs, "-metrics", filepath.Join(dir, "cluster.jsonl"), "-metrics-every", "1")
	t.Logf("mlp -epochs %s at world 8 on 4 nodes: %v", epochs, time.Since(start).Round(time.Millisecond))
	require.Contains(t, outs[0], "world=8 backend=hier")
	want, got := epochLine.FindAllString(local, -1), epochLine.FindAllString(outs[0], -1)
	require.Len(t, want, 2, local)
	assert.Equal(t, want, got, "per-epoch losses")
	wl, gl := trainLosses(t, filepath.Join(dir, "host.jsonl")), trainLosses(t, filepath.Join(dir, "cluster.jsonl"))
	require.NotEmpty(t, wl)
	require.Equal(t, len(wl), len(gl))
	worst := 0.0
	for i := range wl {
		worst = math.Max(worst, math.Abs(wl[i]-gl[i]))
	}
	t.Logf("%d logged losses, largest difference %.3g", len(wl), worst)
	assert.LessOrEqual(t, worst, 1e-5, fmt.Sprintf("host %v\ncluster %v", wl, gl))
}
