package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startRank starts one process of bin as rank of a world-rank job whose
// rank 0 hosts the store on loopback at port, the way a hand-written
// script or a second copy of one would: nothing but the environment ties
// it to a job.
func startRank(t *testing.T, bin string, port, rank, world int, env []string, args ...string) *worker {
	t.Helper()
	w := &worker{rank: rank, stdout: &buffer{}, stderr: &buffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Dir = t.TempDir()
	w.cmd.Env = append(append(cleanEnv(), markerVar+"="+randomHex(8),
		"RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world), "LOCAL_RANK="+strconv.Itoa(rank),
		"LOCAL_WORLD_SIZE="+strconv.Itoa(world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port)), env...)
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
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			killGroup(w.cmd.Process.Pid)
			<-w.done
		}
	})
	return w
}

// TestStrangerRank starts, next to a job A, a rank of another job that
// reaches A's store: a second copy of the same script with no token and
// the default port, or a rank with another run id. Before issue 24 the
// stranger's rank 1 silently took A's rank 1's place (A's all-reduce
// returned B's numbers and A's real rank 1 timed out), or, once A had
// formed, waited for the whole timeout. Now the stranger is refused at once
// with a message naming what it collided with, and A notices.
func TestStrangerRank(t *testing.T) {
	skipShort(t)
	const timeout = 20 * time.Second
	train := []string{"-epochs", "100000", "-ckpt-dir", ""}

	t.Run("same script again", func(t *testing.T) {
		port := freePort(t)
		env := []string{"GODDP_TIMEOUT=" + timeout.String()}
		a := []*worker{startRank(t, linearBin, port, 0, 2, env, train...), startRank(t, linearBin, port, 1, 2, env, train...)}
		waitFor(t, 60*time.Second, func() bool { return epochLine(2).MatchString(a[0].stdout.String()) }, a[0].stderr)
		tally.faults.Add(1)
		began := time.Now()
		b := []*worker{startRank(t, linearBin, port, 0, 2, env, train...), startRank(t, linearBin, port, 1, 2, env, train...)}
		for _, w := range b {
			code, took := w.wait(t, began, timeout+30*time.Second)
			t.Logf("job B's rank %d exited %d after %v: %s", w.rank, code, took.Round(time.Millisecond), strings.TrimSpace(w.stderr.String()))
			assert.Equal(t, 1, code, "B's rank %d", w.rank)
			assert.Less(t, took, 10*time.Second, "B's rank %d is refused at once, not after the timeout", w.rank)
		}
		assert.Contains(t, b[0].stderr.String(), fmt.Sprintf("is another job using port %d?", port))
		assert.Contains(t, b[1].stderr.String(), fmt.Sprintf("rank 1: rank 1 of the job at 127.0.0.1:%d is already taken by pid %d on host",
			port, a[1].cmd.Process.Pid))
		// A's rank 0, which hosts the store, reports the stranger; A goes on.
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(a[0].stderr.String(), "WARNING: rank 1 was claimed twice") }, a[0].stderr)
		assert.Regexp(t, fmt.Sprintf(`comm: rank 0: WARNING: rank 1 was claimed twice: first by pid %d on host \S+, then by pid %d on host`,
			a[1].cmd.Process.Pid, b[1].cmd.Process.Pid), a[0].stderr.String())
		m := regexp.MustCompile(`Epoch (\d+) \|`).FindAllStringSubmatch(a[0].stdout.String(), -1)
		last, _ := strconv.Atoi(m[len(m)-1][1])
		waitFor(t, 60*time.Second, func() bool { return epochLine(last + 2).MatchString(a[0].stdout.String()) }, a[0].stderr)
		for _, w := range a {
			select {
			case <-w.done:
				t.Fatalf("A's rank %d exited: %s", w.rank, w.stderr.String())
			default:
			}
		}
	})

	t.Run("another run id", func(t *testing.T) {
		port := freePort(t)
		env := []string{"GODDP_TIMEOUT=" + timeout.String(), "GODDP_RUN_ID=jobA"}
		a := []*worker{startRank(t, linearBin, port, 0, 2, env, train...), startRank(t, linearBin, port, 1, 2, env, train...)}
		waitFor(t, 60*time.Second, func() bool { return epochLine(1).MatchString(a[0].stdout.String()) }, a[0].stderr)
		tally.faults.Add(1)
		began := time.Now()
		b1 := startRank(t, linearBin, port, 1, 2, []string{"GODDP_TIMEOUT=" + timeout.String(), "GODDP_RUN_ID=jobB"}, train...)
		code, took := b1.wait(t, began, timeout+30*time.Second)
		t.Logf("job B's rank 1 exited %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(b1.stderr.String()))
		assert.Equal(t, 1, code)
		assert.Less(t, took, 10*time.Second, "refused at once, not after the timeout")
		assert.Contains(t, b1.stderr.String(), fmt.Sprintf(`rank 1: this rank's run id is "jobB" but the job at 127.0.0.1:%d is run "jobA", whose rank 0 is pid %d`,
			port, a[0].cmd.Process.Pid))
	})

	t.Run("during rendezvous", func(t *testing.T) {
		// A world of 3 whose rank 2 comes last: A's ranks 0 and 1 and the
		// stranger's rank 1 all meet in A's rendezvous. Whichever rank 1
		// is second is refused naming the first, and the rendezvous fails
		// on every rank at once, naming rank 1.
		probe := buildProgram(t, "./testdata/collprobe")
		port := freePort(t)
		env := []string{"GODDP_TIMEOUT=" + timeout.String(), "GODDP_BACKEND=tcp"}
		began := time.Now()
		ws := []*worker{startRank(t, probe, port, 0, 3, env), startRank(t, probe, port, 1, 3, env)}
		time.Sleep(500 * time.Millisecond)
		tally.faults.Add(1)
		ws = append(ws, startRank(t, probe, port, 1, 3, env))
		refused := 0
		for i, w := range ws {
			code, took := w.wait(t, began, timeout+30*time.Second)
			e := strings.TrimSpace(w.stderr.String())
			t.Logf("process %d (rank %d) exited %d after %v: %s", i, w.rank, code, took.Round(time.Millisecond), e)
			assert.Equal(t, 1, code, "process %d", i)
			assert.Less(t, took, 10*time.Second, "process %d fails at once, not after the timeout", i)
			if strings.Contains(e, "is already taken by pid") {
				refused++
			} else {
				assert.Contains(t, e, "the job's rendezvous at 127.0.0.1:"+strconv.Itoa(port)+" failed: rank 1 was claimed twice", "process %d", i)
			}
		}
		assert.Equal(t, 1, refused, "one of the two rank 1s is refused as the second claimant")
	})
}
