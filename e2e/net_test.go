package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerConn is one established TCP connection between two workers, as the
// dialing side sees it.
type peerConn struct {
	local, remote string
}

var ssLine = regexp.MustCompile(`^\S+\s+\S+\s+(\S+)\s+(\S+)\s+users:\(\("[^"]*",pid=(\d+),`)

// peerConns lists the established connections from pid a's sockets to
// sockets of pid b (from `ss -tnp`).
func peerConns(t *testing.T, a, b int) []peerConn {
	t.Helper()
	out, err := exec.Command("ss", "-tnpH", "state", "established").Output()
	require.NoError(t, err)
	type sock struct {
		local, remote string
		pid           int
	}
	var socks []sock
	for _, line := range strings.Split(string(out), "\n") {
		m := ssLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var pid int
		fmt.Sscan(m[3], &pid)
		socks = append(socks, sock{m[1], m[2], pid})
	}
	var conns []peerConn
	for _, s := range socks {
		if s.pid != a {
			continue
		}
		for _, o := range socks {
			if o.pid == b && o.local == s.remote && o.remote == s.local {
				conns = append(conns, peerConn{s.local, s.remote})
			}
		}
	}
	return conns
}

// ssKillSupported reports whether `ss -K` can destroy sockets here (root,
// CONFIG_INET_DIAG_DESTROY).
func ssKillSupported() bool {
	return exec.Command("ss", "-K", "-tn", "dst", "127.0.0.1:1").Run() == nil && syscall.Geteuid() == 0
}

// TestDroppedConnection breaks the link between the two ranks of a training
// job while a collective is in flight, in three ways, and requires an error
// (never a hang), a root cause from ddprun and no leftover process:
//   - the peer sockets are destroyed with `ss -K` (both processes live on; the
//     kernel aborts the connection, as a middlebox reset or a NIC fault would);
//   - the peer is frozen with SIGSTOP, then killed;
//   - the peer is frozen with SIGSTOP and left so: the survivor's collective
//     times out after GODDP_TIMEOUT, naming the frozen rank, and ddprun ends
//     the frozen process.
func TestDroppedConnection(t *testing.T) {
	skipShort(t)
	const timeout = 4 * time.Second
	tests := []struct {
		name    string
		backend string
		fault   func(t *testing.T, j *job, ws map[int]int)
		cause   string // ddprun's root-cause line
		log     int    // worker whose stderr tells
		want    string // regexp in that worker's stderr
	}{
		{"ss -K peer sockets", "tcp", func(t *testing.T, j *job, ws map[int]int) {
			if !ssKillSupported() {
				t.Skip("ss -K cannot destroy sockets here (needs root and CONFIG_INET_DIAG_DESTROY)")
			}
			conns := peerConns(t, ws[1], ws[0])
			require.NotEmpty(t, conns, "no connection from rank 1 to rank 0")
			for _, c := range conns {
				tally.faults.Add(1)
				out, err := exec.Command("ss", "-K", "-tnH", "src", c.local, "dst", c.remote).CombinedOutput()
				require.NoError(t, err, "%s", out)
				t.Logf("destroyed rank 1's socket %s -> %s", c.local, c.remote)
			}
		}, "cause      : exit code 1", 0, `peer failed: .*rank 1: connection (reset|closed)`},
		{"SIGSTOP then SIGKILL", "tcp", func(t *testing.T, j *job, ws map[int]int) {
			j.inject(ws[1], syscall.SIGSTOP)
			time.Sleep(time.Second)
			j.inject(ws[1], syscall.SIGKILL)
		}, "cause      : signal SIGKILL", 0, `peer failed: .*rank 1|stopped \(terminated signal received\)`},
		{"frozen peer tcp", "tcp", func(t *testing.T, j *job, ws map[int]int) {
			j.inject(ws[1], syscall.SIGSTOP)
		}, "cause      : exit code 1", 0, `timeout: .*rank 1`},
		{"frozen peer shm", "shm", func(t *testing.T, j *job, ws map[int]int) {
			j.inject(ws[1], syscall.SIGSTOP)
		}, "cause      : exit code 1", 0, `timeout: .*rank 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := start(t, spec{args: []string{"-epochs", "100000", "-ckpt-dir", ""}, logDir: true,
				launcher: []string{"--grace-period", "2"},
				env:      []string{"GODDP_BACKEND=" + tc.backend, "GODDP_TIMEOUT=" + timeout.String()}})
			ws := j.workers(2, 0, 30*time.Second)
			j.waitOut(epochLine(3), 30*time.Second)
			faulted := time.Now()
			tc.fault(t, j, ws)
			bound := 2*timeout + 5*time.Second // the timeout, the grace period, slack
			code, _ := j.wait(bound + 30*time.Second)
			took := time.Since(faulted)
			t.Logf("ddprun exited %d, %v after the fault", code, took.Round(time.Millisecond))
			assert.Equal(t, 1, code, j.stderr.String())
			assert.Less(t, took, bound)
			assert.Contains(t, j.stderr.String(), "Root cause")
			assert.Contains(t, j.stderr.String(), tc.cause)
			log := j.workerLog(0, tc.log, "stderr")
			assert.Regexp(t, tc.want, log)
			t.Logf("rank %d: %s", tc.log, strings.TrimSpace(tail(log, 2)))
			j.requireNoLeftovers()
		})
	}
}
