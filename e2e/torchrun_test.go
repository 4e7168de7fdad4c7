package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// torchrun's tests run Debian's torch 1.13 torchrun (through
// testdata/torchrun/torchrun.py, which works around torch's own bug under
// Python 3.11 and changes nothing else) on goddp programs with
// --no_python, as a cluster whose job scripts already use torchrun would.

// python3 is the interpreter whose torch provides torchrun.
const python3 = "/usr/bin/python3"

var torchrunCheck struct {
	sync.Once
	err error
}

// requireTorchrun skips the test when python3 cannot import torchrun.
func requireTorchrun(t *testing.T) {
	t.Helper()
	skipShort(t)
	torchrunCheck.Do(func() {
		out, err := exec.Command(python3, "-c", "import torch.distributed.run").CombinedOutput()
		if err != nil {
			torchrunCheck.err = err
			if s := strings.TrimSpace(string(out)); s != "" {
				torchrunCheck.err = &exec.Error{Name: s, Err: err}
			}
		}
	})
	if torchrunCheck.err != nil {
		t.Skipf("%s cannot import torch.distributed.run, so there is no torchrun to test with: %v", python3, torchrunCheck.err)
	}
}

// runTorchrun runs torchrun with args in a fresh directory and returns its
// exit code and output (stdout and stderr together, its workers' included).
// Past limit the run counts as hung: it is killed and fails the test.
func runTorchrun(t *testing.T, limit time.Duration, args ...string) (int, string) {
	t.Helper()
	wrapper, err := filepath.Abs("testdata/torchrun/torchrun.py")
	require.NoError(t, err)
	marker := randomHex(8)
	cmd := exec.Command(python3, append([]string{wrapper}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), markerVar+"="+marker)
	out := &buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	tally.jobs.Add(1)
	killAll := func() {
		killGroup(cmd.Process.Pid)
		for _, p := range marked(marker) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	t.Cleanup(killAll)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		return code, out.String()
	case <-time.After(limit):
		tally.hangs.Add(1)
		killAll()
		<-done
		t.Fatalf("HANG: torchrun %s still running after %v\noutput:\n%s", strings.Join(args, " "), limit, out.String())
		return -1, ""
	}
}

// epochLosses are rank 0's "epoch=N loss=L" lines, in order.
func epochLosses(out string) []string {
	return regexp.MustCompile(`epoch=\d+ loss=[0-9.]+`).FindAllString(out, -1)
}

// TestTorchrunLinear: torchrun launches examples/linear at world 2, with
// static rendezvous (its agent hosts the store and the workers join it:
// TORCHELASTIC_USE_AGENT_STORE=True) and with --standalone (c10d
// rendezvous; torch 1.13 lets rank 0 host the workers' store), and both
// train to the same per-epoch losses as ddprun.
func TestTorchrunLinear(t *testing.T) {
	requireTorchrun(t)
	const epochs = 3
	linear := []string{"--no_python", linearBin, "-epochs", strconv.Itoa(epochs)}

	j := start(t, spec{args: linear[2:]})
	code, _ := j.wait(2 * time.Minute)
	require.Zero(t, code, "ddprun's reference run failed:\n%s\n%s", j.stdout.String(), j.stderr.String())
	want := epochLosses(j.stdout.String())
	require.Len(t, want, epochs, "ddprun's reference run:\n%s", j.stdout.String())

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"static", []string{"--nnodes", "1", "--nproc_per_node", "2",
			"--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(freePort(t))}},
		{"standalone", []string{"--standalone", "--nnodes", "1", "--nproc_per_node", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runTorchrun(t, 2*time.Minute, append(tc.args, linear...)...)
			require.Zero(t, code, "torchrun failed:\n%s", out)
			require.Equal(t, want, epochLosses(out), "torchrun's losses differ from ddprun's:\n%s", out)
		})
	}
}

// TestTorchrunRankFailure: a goddp rank that fails under torchrun (after
// joining its group through the agent's store) is torchrun's root cause,
// shown in its failure summary with the rank and goddp's message, read
// from goddp's error file: no Python traceback in its place, and none but
// the ChildFailedError torchrun raises to print the summary.
func TestTorchrunRankFailure(t *testing.T) {
	requireTorchrun(t)
	bin := buildProgram(t, "./testdata/torchfail")
	code, out := runTorchrun(t, 2*time.Minute, "--nnodes", "1", "--nproc_per_node", "2",
		"--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(freePort(t)), "--monitor_interval", "1",
		"--no_python", bin, "-fail-rank", "1")
	require.NotZero(t, code, "torchrun succeeded:\n%s", out)
	require.Contains(t, out, "rank 0: all-reduced 2 over 2 ranks", "the ranks never formed their group:\n%s", out)

	root := out[strings.LastIndex(out, "Root Cause (first observed failure):"):]
	require.Contains(t, out, "Root Cause (first observed failure):", out)
	require.Contains(t, root, "rank      : 1 (local_rank: 1)", out)
	require.Contains(t, root, "error_file: ", out)
	require.Contains(t, root, "traceback : rank 1: loss is NaN at step 7 (goddp test failure)\n", out)
	for _, bad := range []string{"ValueError", "Failed to parse reply file", "invalid literal", "To enable traceback"} {
		require.NotContains(t, out, bad, "torchrun could not read goddp's error file:\n%s", out)
	}
	// torchrun ends every failed job by raising ChildFailedError, whose
	// traceback carries the summary: that one, and no other.
	require.Equal(t, 1, strings.Count(out, "Traceback (most recent call last):"), out)
	require.Regexp(t, `(?s)Traceback \(most recent call last\):.*raise ChildFailedError\(\s*torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError: \s*=+\n`, out)
}
