package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
)

// strangers are what the auth test sends to a listening port: each connects,
// does its thing and hangs up (or is hung up on).
var strangers = []struct {
	name string
	send func(c net.Conn)
}{
	{"random bytes", func(c net.Conn) { _, _ = c.Write(randomBytes(4096)) }},
	{"64 KiB of 0xff", func(c net.Conn) { _, _ = c.Write(bytes.Repeat([]byte{0xff}, 64<<10)) }},
	{"http request", func(c net.Conn) { _, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) }},
	{"connect and close", func(c net.Conn) {}},
	{"half a handshake", func(c net.Conn) { _, _ = c.Write([]byte("GDDP")) }},
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// poke runs every stranger against addr, concurrently, each bounded.
func poke(t *testing.T, addr string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range strangers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				t.Logf("%s to %s: %v", s.name, addr, err)
				return
			}
			defer c.Close()
			tally.faults.Add(1)
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			s.send(c)
			_, _ = c.Read(make([]byte, 512)) // until refused, or the deadline
		}()
	}
	// A goddp client with the wrong token.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tally.faults.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := comm.DialStore(ctx, addr, comm.WithToken("not-the-job-token"))
		if err == nil {
			s.Close()
		}
		assert.ErrorIs(t, err, comm.ErrAuth, "a client with the wrong token at %s", addr)
	}()
	wg.Wait()
}

// listening returns pid's listening TCP addresses (from `ss -tlnp`).
func listening(pid int) []string {
	out, err := exec.Command("ss", "-tlnpH").Output()
	if err != nil {
		return nil
	}
	var addrs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(line, "pid="+strconv.Itoa(pid)+",") {
			addrs = append(addrs, f[3])
		}
	}
	return addrs
}

// TestAuth runs a 2-rank tcp job under ddprun with a job token and, while it
// forms its mesh and trains, sends strangers to the store ddprun hosts and to
// rank 0's peer listener: garbage bytes, an HTTP request, a half handshake, a
// goddp client with the wrong token, and real workers started with a wrong or
// no GODDP_TOKEN. The impostors are refused with a clear error, the servers
// log each refusal (without the token), and the job completes.
//
// Rank 0's peer listener is open only while the mesh forms, so rank 1 runs
// under strace with its connect(2) calls delayed by 1.5 s, and the listener
// is found with ss. Both tools are required (scripts/setup-test.sh installs
// them): a missing tool fails the test, so the probe cannot silently vanish.
func TestAuth(t *testing.T) {
	skipShort(t)
	token := "e2e-token-" + randomHex(12)
	dir := t.TempDir()
	for _, tool := range []string{"strace", "ss"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "TestAuth needs %s (run scripts/setup-test.sh as root: it installs strace and iproute2)", tool)
	}
	require.NoError(t, exec.Command("strace", "-f", "-qq", "-o", "/dev/null", "true").Run(),
		"strace cannot trace here (ptrace not permitted?); TestAuth needs it to hold rank 1's connect(2)")
	program := filepath.Join(dir, "rank1-slow-connect")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$RANK\" = 1 ]; then GODEBUG=asyncpreemptoff=1 exec strace -f -qq --seccomp-bpf -o /dev/null "+
		"-e trace=connect -e inject=connect:delay_enter=1500000 %s \"$@\"; fi\nexec %s \"$@\"\n", linearBin, linearBin)
	require.NoError(t, os.WriteFile(program, []byte(script), 0o755))
	j := start(t, spec{dir: dir, program: program, logDir: true,
		args: []string{"-epochs", "200", "-ckpt-dir", ""},
		env:  []string{"GODDP_TOKEN=" + token, "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=30s"}})
	store := j.storeAddr()

	// The store: strangers and impostor workers, while the job starts.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.Logf("probing the store %s", store)
		poke(t, store)
	}()
	_, port, _ := net.SplitHostPort(store)
	impostors := []struct{ name, tokenEnv, want string }{
		{"wrong token", "GODDP_TOKEN=a-wrong-guess-0123456789", "authentication failed"},
		{"no token", "", "authentication failed"},
	}
	for _, im := range impostors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(linearBin, "-epochs", "1", "-ckpt-dir", "")
			cmd.Dir = dir
			cmd.Env = append(cleanEnv(), "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "GODDP_STORE_HOSTED=1", "GODDP_TIMEOUT=10s")
			if im.tokenEnv != "" {
				cmd.Env = append(cmd.Env, im.tokenEnv)
			}
			tally.faults.Add(1)
			began := time.Now()
			out, err := runBounded(cmd, 30*time.Second)
			t.Logf("impostor with %s: %v after %v: %s", im.name, err, time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
			assert.Error(t, err, "impostor with %s", im.name)
			assert.Contains(t, out, im.want)
			assert.Less(t, time.Since(began), 10*time.Second, "refused at once, not timed out")
		}()
	}

	var peer string // rank 0's only listener
	deadline := time.Now().Add(20 * time.Second)
	for peer == "" && time.Now().Before(deadline) {
		for _, p := range marked(j.marker) {
			if p.worker && p.rank == 0 {
				if ls := listening(p.pid); len(ls) > 0 {
					peer = ls[0]
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.NotEmpty(t, peer, "rank 0's peer listener")
	// Every listener of the job (ddprun's store, the peer listener)
	// binds to loopback, the address it was given, not 0.0.0.0.
	for _, p := range marked(j.marker) {
		for _, l := range listening(p.pid) {
			assert.True(t, strings.HasPrefix(l, "127.0.0.1:"), "pid %d listens on %s", p.pid, l)
		}
	}
	t.Logf("probing rank 0's peer listener %s", peer)
	poke(t, peer)
	wg.Wait()
	select {
	case <-j.done:
		t.Fatalf("the job ended before all strangers were through; make it longer\n%s", j.stderr.String())
	default:
	}

	code, took := j.wait(90 * time.Second)
	t.Logf("job took %v", took.Round(time.Millisecond))
	require.Equal(t, 0, code, j.stderr.String())
	assert.Contains(t, j.stdout.String(), "samples_per_s=")

	errs := j.stderr.String()
	for _, why := range []string{"wrong job token", "client has no job token", "bad handshake magic"} {
		assert.Regexp(t, `ddprun: store: comm: store `+regexp.QuoteMeta(store)+`: refused connection from 127\.0\.0\.1:\d+: .*`+why, errs)
	}
	rank0 := j.workerLog(0, 0, "stderr")
	assert.Regexp(t, `comm: tcp rank 0: refused connection from 127\.0\.0\.1:\d+: comm: authentication failed`, rank0)
	// The token appears in no output and no log.
	all := j.stdout.String() + errs + rank0 + j.workerLog(0, 1, "stderr") + j.workerLog(0, 0, "stdout")
	assert.NotContains(t, all, token)
	assert.NotContains(t, all, token[len("e2e-token-"):])
	j.requireNoLeftovers()
}

// runBounded runs cmd, killing it past limit (a hang fails the caller's
// assertions through the returned error and is counted).
func runBounded(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(limit):
		tally.hangs.Add(1)
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("HANG: still running after %v", limit)
	}
}
