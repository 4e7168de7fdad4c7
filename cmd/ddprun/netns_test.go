package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
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

// Two "machines" on one host: network namespaces joined by a veth pair,
// 10.99.0.1/24 and 10.99.0.2/24. The traffic never leaves the machine.

type netnsPair struct {
	ns   [2]string
	addr [2]string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newNetnsPair creates the namespaces, or skips the test saying why.
func newNetnsPair(t *testing.T) *netnsPair {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping the multi-node test: the ip command (iproute2) is not installed")
	}
	sweepStaleNamespaces()
	id := os.Getpid()
	p := &netnsPair{
		ns:   [2]string{fmt.Sprintf("ddpt%d_0", id), fmt.Sprintf("ddpt%d_1", id)},
		addr: [2]string{"10.99.0.1", "10.99.0.2"},
	}
	veth := [2]string{fmt.Sprintf("dv%d_0", id), fmt.Sprintf("dv%d_1", id)}
	if err := ipCmd("netns", "add", p.ns[0]); err != nil {
		t.Skipf("skipping the multi-node test: cannot create a network namespace "+
			"(needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { p.cleanup(t) })
	steps := [][]string{
		{"netns", "add", p.ns[1]},
		{"link", "add", veth[0], "type", "veth", "peer", "name", veth[1]},
	}
	for i := 0; i < 2; i++ {
		steps = append(steps,
			[]string{"link", "set", veth[i], "netns", p.ns[i]},
			[]string{"-n", p.ns[i], "addr", "add", p.addr[i] + "/24", "dev", veth[i]},
			[]string{"-n", p.ns[i], "link", "set", veth[i], "up"},
			[]string{"-n", p.ns[i], "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			t.Skipf("skipping the multi-node test: cannot set up the namespaces: %v", err)
		}
	}
	return p
}

// sweepStaleNamespaces deletes namespaces left by an earlier test process
// that was killed before its cleanup ran (their names carry its pid).
func sweepStaleNamespaces() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		var pid, idx int
		if n, _ := fmt.Sscanf(name, "ddpt%d_%d", &pid, &idx); n == 2 && !alive(pid) {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// cleanup kills whatever still runs in the namespaces, then deletes them
// (which deletes the veth pair too).
func (p *netnsPair) cleanup(t *testing.T) {
	for _, ns := range p.ns {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				t.Errorf("process %d was left running in namespace %s", pid, ns)
				_ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// runNodes runs one ddprun per namespace; node i starts after delay[i].
func (p *netnsPair) runNodes(t *testing.T, delay [2]time.Duration, args func(node int) []string) [2]result {
	var res [2]result
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay[i])
			// Both namespaces share the host name and /dev/shm, so comm would
			// pick shm; force TCP so that the test crosses the veth link.
			cmd := ddprunCmd([]string{"ip", "netns", "exec", p.ns[i]},
				[]string{"GODDP_TOKEN=netns-test-token", "GODDP_BACKEND=tcp"}, args(i)...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
				errb.WriteString(err.Error())
			}
			res[i] = result{code, out.String(), errb.String(), time.Since(start)}
		}()
	}
	wg.Wait()
	return res
}

func TestMultiNodeNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test skipped in -short mode")
	}
	p := newNetnsPair(t)
	static := func(timeout string, extra ...string) func(int) []string {
		return func(node int) []string {
			return append([]string{"--nnodes", "2", "--node-rank", strconv.Itoa(node), "--nproc-per-node", "2",
				"--master-addr", p.addr[0], "--master-port", "29400", "--rdzv-timeout", timeout,
				"--monitor-interval", "0.05", "--grace-period", "2", worker}, extra...)
		}
	}

	t.Run("static, late node", func(t *testing.T) {
		res := p.runNodes(t, [2]time.Duration{0, 1500 * time.Millisecond}, static("20", "-mode", "allreduce"))
		for node, r := range res {
			require.Equal(t, 0, r.code, "node %d:\n%s", node, r.stderr)
			rs := reports(r.stdout, "start")
			require.Len(t, rs, 2)
			for _, w := range rs {
				assert.Equal(t, strconv.Itoa(node), w.str("GROUP_RANK"))
				assert.Equal(t, "4", w.str("WORLD_SIZE"))
				assert.Equal(t, p.addr[0], w.str("MASTER_ADDR"))
				lr, _ := strconv.Atoi(w.str("LOCAL_RANK"))
				assert.Equal(t, strconv.Itoa(2*node+lr), w.str("RANK"))
			}
			ok := reports(r.stdout, "allreduce-ok")
			assert.Len(t, ok, 2, "node %d's workers joined the group through node 0's store", node)
			for _, w := range ok {
				assert.Equal(t, "tcp", w.str("backend"), "across nodes the traffic is TCP")
			}
		}
		assert.Contains(t, res[0].stderr, "hosting the rendezvous store on 10.99.0.1:29400")
	})

	t.Run("elastic store backend", func(t *testing.T) {
		res := p.runNodes(t, [2]time.Duration{0, 300 * time.Millisecond}, func(node int) []string {
			args := []string{"--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", p.addr[0] + ":29401",
				"--rdzv-id", "elastic1", "--rdzv-conf", "last_call_timeout=3", "--nproc-per-node", "1",
				"--monitor-interval", "0.05"}
			if node == 0 {
				args = append(args, "--node-rank", "0")
			}
			return append(args, worker, "-mode", "store", "-code", "0")
		})
		for node, r := range res {
			require.Equal(t, 0, r.code, "node %d:\n%s", node, r.stderr)
			for _, w := range reports(r.stdout, "start") {
				assert.Equal(t, "2", w.str("WORLD_SIZE"))
				assert.Equal(t, strconv.Itoa(node), w.str("RANK"))
				assert.Equal(t, "elastic1", w.str("TORCHELASTIC_RUN_ID"))
			}
		}
	})

	t.Run("failure on node 1 stops node 0", func(t *testing.T) {
		res := p.runNodes(t, [2]time.Duration{}, static("20", "-mode", "store", "-fail-rank", "3", "-code", "3", "-delay", "300ms"))
		for node, r := range res {
			assert.Equal(t, launch.ExitWorkerFailed, r.code, "node %d:\n%s", node, r.stderr)
			assert.Less(t, r.took, 20*time.Second)
			assert.Contains(t, r.stderr, "rank 3 (local rank 1", "node %d names the root cause", node)
			assert.Contains(t, r.stderr, "boom after the store exchange")
		}
	})

	t.Run("node 1 never arrives", func(t *testing.T) {
		cmd := ddprunCmd([]string{"ip", "netns", "exec", p.ns[0]}, []string{"GODDP_TOKEN=netns-test-token"},
			static("1", "-mode", "env")(0)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, launch.ExitRendezvous, ee.ExitCode(), string(out))
		assert.Contains(t, string(out), "node rank(s) 1 never arrived")
	})

	t.Run("node 1 interrupted or killed", func(t *testing.T) {
		tests := []struct {
			sig      syscall.Signal
			code0    int // node 0's exit code
			code1    int
			message0 string
		}{
			{syscall.SIGTERM, launch.ExitRendezvous, 143, "the job was shut down"},
			{syscall.SIGKILL, launch.ExitWorkerFailed, -1, "sent no heartbeat"},
		}
		for _, tc := range tests {
			t.Run(tc.sig.String(), func(t *testing.T) {
				env := []string{"GODDP_TOKEN=netns-test-token"}
				args := func(node int) []string {
					return static("20", "-mode", "sleep")(node)
				}
				n1 := ddprunCmd([]string{"ip", "netns", "exec", p.ns[1]}, env,
					append([]string{"--rdzv-conf", "heartbeat_timeout=2"}, args(1)...)...)
				out1 := &lines{}
				n1.Stdout, n1.Stderr = out1, out1
				require.NoError(t, n1.Start())
				n0, out0, err0b := startDdprun(t, []string{"ip", "netns", "exec", p.ns[0]}, env, 2,
					append([]string{"--rdzv-conf", "heartbeat_timeout=2"}, args(0)...)...)
				waitFor(t, func() bool { return len(reports(out1.String(), "start")) == 2 })
				start := time.Now()
				require.NoError(t, n1.Process.Signal(tc.sig))
				err1 := n1.Wait()
				var ee *exec.ExitError
				require.ErrorAs(t, err1, &ee)
				assert.Equal(t, tc.code1, ee.ExitCode(), out1.String())
				err0 := n0.Wait()
				require.ErrorAs(t, err0, &ee)
				assert.Equal(t, tc.code0, ee.ExitCode(), err0b.String())
				assert.Contains(t, err0b.String(), tc.message0)
				assert.Less(t, time.Since(start), 15*time.Second)
				var pids []int
				for _, o := range []string{out0.String(), out1.String()} {
					for _, r := range reports(o, "start") {
						pids = append(pids, r.pid())
					}
				}
				waitDead(t, pids, 5*time.Second)
			})
		}
	})
}
