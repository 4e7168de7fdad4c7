package scale

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A job killed at world 3 mid-epoch and restarted at world 2 from the
// checkpoint it saved (the model and the sampler state) sees every sample
// of that epoch exactly once, by index: the steps the killed job had
// saved, then the rest, re-dealt over 2 ranks
// (data.DistributedSampler.LoadStateElastic). And it trains on from where
// it stopped: its loss curve, as a function of the samples seen, stays
// within the noise of uninterrupted runs (see withinNoise), which a resume
// that started the model over does not.
func TestElasticResume(t *testing.T) {
	if testing.Short() {
		t.Skip("scale: runs 2- and 3-rank jobs")
	}
	const n, batch, hold = 1000, 8, 10
	dir := t.TempDir()
	state := filepath.Join(dir, "state.ckpt")
	jobArgs := func(state, log string) []string {
		return []string{"-n", strconv.Itoa(n), "-batch", strconv.Itoa(batch), "-state", state, "-log", log}
	}
	args := jobArgs(state, dir)

	// The noise band: the same epoch uninterrupted at world 2 and at world 3.
	plain := map[int]curve{}
	for _, w := range []int{2, 3} {
		d := filepath.Join(dir, "plain"+strconv.Itoa(w))
		require.NoError(t, os.Mkdir(d, 0o755))
		onHostN(t, w, jobArgs(filepath.Join(d, "state.ckpt"), d))
		plain[w] = lossCurve(readLog(t, filepath.Join(d, fmt.Sprintf("rank0.world%d", w))), -1)
	}

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

	// A resume that drops the saved model and starts it over, from a copy
	// of the same checkpoint: the loss check must reject it.
	fresh := filepath.Join(dir, "fresh")
	require.NoError(t, os.Mkdir(fresh, 0o755))
	saved, err := os.ReadFile(state)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(fresh, "state.ckpt"), saved, 0o644))
	onHostN(t, 2, append(jobArgs(filepath.Join(fresh, "state.ckpt"), fresh), "-fresh-model"))

	// World 2 resumes from the saved state.
	res := onHostN(t, 2, args)
	require.Contains(t, res, "resumed from")

	count := make([]int, n)
	for _, f := range []struct {
		name  string
		steps int // steps that count (-1: all)
	}{{"rank0.world3", hold}, {"rank1.world3", hold}, {"rank2.world3", hold}, {"rank0.world2", -1}, {"rank1.world2", -1}} {
		for step, l := range readLog(t, filepath.Join(dir, f.name)) {
			if f.steps >= 0 && step >= f.steps {
				continue // after the saved state: redone by the resumed job
			}
			for _, i := range l.idx {
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

	before := lossCurve(readLog(t, filepath.Join(dir, "rank0.world3")), hold)
	resumed := slices.Concat(before, lossCurve(readLog(t, filepath.Join(dir, "rank0.world2")), -1))
	restarted := slices.Concat(before, lossCurve(readLog(t, filepath.Join(fresh, "rank0.world2")), -1))
	band, bandAt, dev, at := withinNoise(plain[2], plain[3], resumed)
	t.Logf("loss after the epoch: world 2 %.4g, world 3 %.4g, resumed %.4g; noise band %.3g (at %d samples), resumed strays %.3g beyond it at %d samples",
		plain[2].at(n), plain[3].at(n), resumed.at(n), band, bandAt, dev, at)
	assert.LessOrEqual(t, dev, band, "the resumed run's loss curve leaves the noise band of uninterrupted runs at %d samples:\nresumed %v\nworld 2 %v\nworld 3 %v",
		at, resumed, plain[2], plain[3])
	_, _, devFresh, atFresh := withinNoise(plain[2], plain[3], restarted)
	t.Logf("a resume that restarted the model strays %.3g beyond the band at %d samples", devFresh, atFresh)
	assert.Greater(t, devFresh, band, "the loss check cannot tell a resume that restarted the model from a real one")
}

// onHostN runs `ddprun --standalone --nproc-per-node nproc elastic args` here.
func onHostN(t *testing.T, nproc int, args []string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "ddprun"), append([]string{"--standalone", "--nproc-per-node", strconv.Itoa(nproc),
		filepath.Join(binDir, "elastic")}, args...)...)
	cmd.Env = jobEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return runAll(t, time.Minute, cmd)[0]
}

// logged is one step of a rank's log.
type logged struct {
	idx  []int
	seen int     // the epoch's samples seen by all ranks after the step
	loss float64 // the mean squared error over the dataset after the step
}

var logLine = regexp.MustCompile(`^step=(\d+) idx=([\d,]*) seen=(\d+) loss=(\S+)$`)

// readLog maps step -> what one rank's log says of it.
func readLog(t *testing.T, path string) map[int]logged {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	steps := map[int]logged{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		require.NotNil(t, m, "%s: %q", path, sc.Text())
		step, _ := strconv.Atoi(m[1])
		var l logged
		for _, s := range strings.Split(m[2], ",") {
			if s == "" {
				continue
			}
			i, err := strconv.Atoi(s)
			require.NoError(t, err)
			l.idx = append(l.idx, i)
		}
		l.seen, _ = strconv.Atoi(m[3])
		l.loss, err = strconv.ParseFloat(m[4], 64)
		require.NoError(t, err, sc.Text())
		steps[step] = l
	}
	require.NoError(t, sc.Err())
	return steps
}

// curve is a run's loss after each step against the samples seen, in
// step order.
type curve []point

type point struct {
	seen int
	loss float64
}

// lossCurve is the curve of a log's steps before upTo (-1: all).
func lossCurve(steps map[int]logged, upTo int) curve {
	var c curve
	for s := 0; ; s++ {
		l, ok := steps[s]
		if !ok || (upTo >= 0 && s >= upTo) {
			return c
		}
		c = append(c, point{l.seen, l.loss})
	}
}

// at is the curve's log-loss interpolated linearly at seen samples (the
// loss falls about exponentially), as a loss; past its ends, its end.
func (c curve) at(seen int) float64 {
	if seen <= c[0].seen {
		return c[0].loss
	}
	for i := 1; i < len(c); i++ {
		if seen <= c[i].seen {
			a, b := c[i-1], c[i]
			f := float64(seen-a.seen) / float64(b.seen-a.seen)
			return math.Exp((1-f)*math.Log(a.loss) + f*math.Log(b.loss))
		}
	}
	return c[len(c)-1].loss
}

// withinNoise compares curve got with two uninterrupted runs a and b at
// every sample count they all cover. The noise band is the largest gap
// between a and b in log-loss: the same data, model and rate per sample,
// only the world size and so the batches differ. dev is how far got's
// log-loss strays outside [a, b] at its worst, at samples seen. A resume
// that keeps the model and the rest of the epoch strays less than the band.
// One that starts the model over jumps back to the first steps' loss (here
// several times the band), and one that skips samples ends the epoch with
// fewer steps taken, above both (or its curve stops short, at a loss
// above theirs at the end).
func withinNoise(a, b, got curve) (band float64, bandAt int, dev float64, at int) {
	// To the end of the shorter uninterrupted run, not of got: a run that
	// ends its epoch early stays at its last loss.
	from := max(a[0].seen, b[0].seen, got[0].seen)
	to := min(a[len(a)-1].seen, b[len(b)-1].seen)
	for s := from; s <= to; s++ {
		la, lb, lg := math.Log(a.at(s)), math.Log(b.at(s)), math.Log(got.at(s))
		if d := math.Abs(la - lb); d > band {
			band, bandAt = d, s
		}
		if d := max(lg-max(la, lb), min(la, lb)-lg); d > dev {
			dev, at = d, s
		}
	}
	return band, bandAt, dev, at
}
