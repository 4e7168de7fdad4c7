package scale

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job killed at world 3 mid-epoch and restarted at world 2 from the
// sampler state it saved sees every sample of that epoch exactly once, by
// index: the steps the killed job had saved, then the rest, re-dealt over
// 2 ranks (data.DistributedSampler.LoadStateElastic).
func TestElasticResume(t *testing.T) {
	if testing.Short() {
		t.Skip("scale: runs two 2- and 3-rank jobs")
	}
	const n, batch, hold = 1000, 8, 10
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	args := []string{"-n", strconv.Itoa(n), "-batch", strconv.Itoa(batch), "-state", state, "-log", dir}

	// World 3, killed once rank 0 has saved step hold-1.
	cmd := exec.Command(filepath.Join(binDir, "ddprun"), append([]string{"--standalone", "--nproc-per-node", "3",
		filepath.Join(binDir, "elastic")}, append(args, "-hold-after", strconv.Itoa(hold))...)...)
	cmd.Env = jobEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The workers inherit the output pipe; Wait must not wait for them.
	cmd.WaitDelay = 5 * time.Second
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	var waitErr error
	done := make(chan struct{}) // closed once ddprun has been waited for
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			// ddprun stops its workers (their own process groups) on
			// SIGTERM; SIGKILL its group if it does not.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
		for _, m := range regexp.MustCompile(`rank=\d+ pid=(\d+)`).FindAllStringSubmatch(out.String(), -1) {
			if pid, err := strconv.Atoi(m[1]); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL) // a worker of ours, if still there
			}
		}
	})
	pidOf := regexp.MustCompile(`rank=2 pid=(\d+)`)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "holding after step") {
		require.True(t, time.Now().Before(deadline), "the world-3 job never reached step %d:\n%s", hold, out.String())
		time.Sleep(50 * time.Millisecond)
	}
	m := pidOf.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	pid, _ := strconv.Atoi(m[1])
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL), "killing rank 2")
	select {
	case <-done:
		require.Error(t, waitErr, "a job that lost a rank fails")
	case <-time.After(60 * time.Second):
		t.Fatalf("ddprun did not end after rank 2 was killed:\n%s", out.String())
	}

	// World 2 resumes from the saved state.
	res := onHost2(t, args)
	require.Contains(t, res, "resumed from")

	count := make([]int, n)
	for _, f := range []struct {
		name  string
		steps int // steps that count (-1: all)
	}{{"rank0.world3", hold}, {"rank1.world3", hold}, {"rank2.world3", hold}, {"rank0.world2", -1}, {"rank1.world2", -1}} {
		for step, idx := range readLog(t, filepath.Join(dir, f.name)) {
			if f.steps >= 0 && step >= f.steps {
				continue // after the saved state: redone by the resumed job
			}
			for _, i := range idx {
				count[i]++
			}
		}
	}
	var missing, repeated []int
	for i, c := range count {
		if c == 0 {
			missing = append(missing, i)
		} else if c > 1 {
			repeated = append(repeated, i)
		}
	}
	require.Empty(t, missing, "samples never seen")
	require.Empty(t, repeated, "samples seen twice")
}

func onHost2(t *testing.T, args []string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "ddprun"), append([]string{"--standalone", "--nproc-per-node", "2",
		filepath.Join(binDir, "elastic")}, args...)...)
	cmd.Env = jobEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return runAll(t, time.Minute, cmd)[0]
}

// readLog maps step -> indices of one rank's log.
func readLog(t *testing.T, path string) map[int][]int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	steps := map[int][]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var step int
		var list string
		_, err := fmtSscanf(sc.Text(), &step, &list)
		require.NoError(t, err, sc.Text())
		for _, s := range strings.Split(list, ",") {
			if s == "" {
				continue
			}
			i, err := strconv.Atoi(s)
			require.NoError(t, err)
			steps[step] = append(steps[step], i)
		}
	}
	return steps
}

// fmtSscanf reads "step=S idx=LIST" (LIST may be empty).
func fmtSscanf(line string, step *int, list *string) (int, error) {
	a, b, _ := strings.Cut(line, " ")
	var err error
	*step, err = strconv.Atoi(strings.TrimPrefix(a, "step="))
	*list = strings.TrimPrefix(b, "idx=")
	return 2, err
}
