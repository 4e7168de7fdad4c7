package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
)

// Issue 17's fault cases.

// TestDebugCollectivesCatchesMismatch runs a program whose rank 1 issues a
// different collective from rank 0 (another reduce op, size or kind) with
// GODDP_DEBUG_COLLECTIVES=1: both ranks must fail at once with an error that
// names the mismatch and the other rank's call, on both backends. Without
// the flag, tcp catches them too (TestTCPMismatchFailsFast).
func TestDebugCollectivesCatchesMismatch(t *testing.T) {
	skipShort(t)
	bin := buildProgram(t, "./testdata/collprobe")
	for _, backend := range []string{"tcp", "shm"} {
		for _, mode := range []string{"op", "size", "kind"} {
			t.Run(backend+" "+mode, func(t *testing.T) {
				ws := startProgram(t, bin, 2, []string{"GODDP_BACKEND=" + backend, "GODDP_DEBUG_COLLECTIVES=1", "GODDP_TIMEOUT=20s"},
					"-mismatch", mode)
				began := time.Now()
				for _, w := range ws {
					code, took := w.wait(t, began, 60*time.Second)
					errs := w.stderr.String()
					t.Logf("rank %d exited %d after %v: %s", w.rank, code, took.Round(time.Millisecond), strings.TrimSpace(tail(errs, 1)))
					assert.Equal(t, 1, code, "rank %d must fail", w.rank)
					assert.Less(t, took, 15*time.Second, "rank %d: a mismatch is reported at once, not at the timeout", w.rank)
					assert.Regexp(t, fmt.Sprintf(`second collective .*mismatch.*rank %d (issued|called) `, 1-w.rank), errs)
					assert.NotContains(t, w.stdout.String(), "result", "rank %d completed the mismatched collective", w.rank)
				}
			})
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes on dir for the test, or skips the
// test when this machine does not allow it (not root, no CAP_SYS_ADMIN);
// checkpoint.TestWriteFileAtomicFailureKeepsOld covers a failing writer
// there.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the unit tests cover a failing writer", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fillDisk writes path until the file system has no space left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC, "filling %s", path)
}

// TestDiskFullDuringSave fills the checkpoint file system (a 1 MiB tmpfs)
// while a 2-rank job saves every epoch. The save that meets the full disk
// must fail on every rank with an error naming the file and ENOSPC (rank 1
// learns it from rank 0); it must leave no temporary file, and every
// checkpoint already in the directory must still load. Once space is freed,
// the job resumes from the newest of them.
func TestDiskFullDuringSave(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	require.NoError(t, os.Mkdir(ck, 0o755))
	mountTmpfs(t, ck, 1<<20)

	args := []string{"-epochs", "100000", "-save-every", "1", "-ckpt-dir", ck, "-seed", "3"}
	j := start(t, spec{dir: dir, args: args, logDir: true, env: []string{"GODDP_TIMEOUT=20s"}})
	j.workers(2, 0, 30*time.Second)
	j.waitOut(regexp.MustCompile(`Epoch 3 \| Training checkpoint saved`), 60*time.Second)
	tally.faults.Add(1)
	fillDisk(t, filepath.Join(ck, "filler"))
	code, took := j.wait(90 * time.Second)
	t.Logf("ddprun exited %d after %v", code, took.Round(time.Millisecond))
	require.Equal(t, 1, code, j.stderr.String())

	rank0, rank1 := j.workerLog(0, 0, "stderr"), j.workerLog(0, 1, "stderr")
	t.Logf("rank 0: %s", strings.TrimSpace(tail(rank0, 1)))
	t.Logf("rank 1: %s", strings.TrimSpace(tail(rank1, 1)))
	saveErr := `save checkpoint at epoch (\d+): checkpoint: save ` + regexp.QuoteMeta(ck) + `/ckpt-e\d+-s\d+\.safetensors: .*no space left on device`
	m := regexp.MustCompile(saveErr).FindStringSubmatch(rank0)
	require.NotNil(t, m, "rank 0 names the file and ENOSPC:\n%s", rank0)
	assert.Regexp(t, `save checkpoint at epoch `+m[1]+`: checkpoint: failed on rank 0: .*no space left on device`, rank1)

	ents, err := os.ReadDir(ck)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, isTempName(e.Name()), "temporary file %s left on the full disk", e.Name())
	}
	saved := savedRe.FindAllStringSubmatch(j.stdout.String(), -1)
	require.NotEmpty(t, saved)
	last := saved[len(saved)-1][2]
	ls := completeCheckpoints(t, ck)
	require.NotEmpty(t, ls)
	assert.Equal(t, last, ls[0], "the newest checkpoint reported saved is the newest on disk")
	for _, p := range ls {
		_, err := checkpoint.Load(p)
		assert.NoError(t, err, "checkpoint %s after the failed save", p)
	}

	require.NoError(t, os.Remove(filepath.Join(ck, "filler")))
	epoch := epochOf(t, last)
	r := start(t, spec{dir: dir, args: []string{"-epochs", strconv.Itoa(epoch + 3), "-save-every", "1", "-ckpt-dir", ck, "-seed", "3"},
		env: []string{"GODDP_TIMEOUT=20s"}})
	code, _ = r.wait(90 * time.Second)
	require.Equal(t, 0, code, r.stderr.String())
	assert.Regexp(t, fmt.Sprintf(`Resumed from epoch %d \(step \d+\) of %s`, epoch, regexp.QuoteMeta(last)), r.stdout.String())
}

// TestBlackholedRank freezes one rank (SIGSTOP) of a group started without
// a launcher: its sockets stay open and its kernel still acknowledges, so
// unlike a killed rank nothing resets; only the survivors' timeouts can end
// the job. On 2, 3 and 4 ranks and both backends, every survivor must fail
// within 2x GODDP_TIMEOUT with a timeout error naming the frozen rank and
// no other (tcp on 3 or 4 ranks used to blame a peer that was itself
// waiting, and call every live peer "no answer").
func TestBlackholedRank(t *testing.T) {
	skipShort(t)
	const timeout = 4 * time.Second
	tests := []struct {
		n       int
		backend string
		victim  int
	}{
		{2, "tcp", 1},
		{2, "tcp", 0},
		{3, "tcp", 1},
		{4, "tcp", 2},
		{3, "shm", 1},
		{4, "shm", 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %d ranks stop rank %d", tc.backend, tc.n, tc.victim), func(t *testing.T) {
			ws := startWorkers(t, tc.n, []string{"GODDP_TIMEOUT=" + timeout.String(), "GODDP_BACKEND=" + tc.backend},
				"-epochs", "100000", "-ckpt-dir", "")
			waitFor(t, 60*time.Second, func() bool { return epochLine(3).MatchString(ws[0].stdout.String()) }, ws[0].stderr)
			tally.faults.Add(1)
			victim := ws[tc.victim].cmd.Process.Pid
			signal(t, victim, syscall.SIGSTOP)
			stopped := time.Now()
			waitStopped(t, victim)
			errs := map[int]string{}
			for _, w := range ws {
				if w.rank == tc.victim {
					continue
				}
				code, took := w.wait(t, stopped, 2*timeout+30*time.Second)
				e := strings.TrimSpace(tail(w.stderr.String(), 1))
				t.Logf("rank %d exited %d after %v: %s", w.rank, code, took.Round(time.Millisecond), e)
				assert.Equal(t, 1, code, "rank %d", w.rank)
				assert.Less(t, took, 2*timeout, "rank %d ends within 2x the timeout", w.rank)
				assert.Regexp(t, fmt.Sprintf(`timeout: .*rank %d\b`, tc.victim), e, "rank %d names the frozen rank", w.rank)
				errs[w.rank] = e
			}
			for r, e := range errs {
				assert.Equal(t, []int{tc.victim}, blamed(e, r), "rank %d must blame the frozen rank %d and no other: %s", r, tc.victim, e)
			}
		})
	}
}

var rankRe = regexp.MustCompile(`\brank (\d+)\b`)

// blamed lists the ranks a timeout error of rank self mentions after
// "timeout:", other than self: the ranks it says it waited for.
var relayRe = regexp.MustCompile(`rank \d+ aborted the group: `)

func blamed(err string, self int) []int {
	_, diag, _ := strings.Cut(err, "timeout:")
	// "rank N aborted the group: ..." relays the diagnosis of the rank that
	// noticed first (tcp fails every rank with it): N passed it on, the
	// diagnosis after it names whom it blames.
	diag = relayRe.ReplaceAllString(diag, "")
	seen := map[int]bool{}
	var out []int
	for _, m := range rankRe.FindAllStringSubmatch(diag, -1) {
		r, _ := strconv.Atoi(m[1])
		if r != self && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// TestStallLaggardNamed: a rank that is merely busy (alive, answering, just
// late to an all-reduce by 5 s) must be named by every other rank once the
// 2 s stall threshold passes, whichever rank it is, rank 0 included, and
// never as "(no answer)". Before issue 17's comm part, ranks other than 0
// logged nothing by default (so a late rank 0 went unreported) and tcp on 2
// ranks called a busy rank 1 "(no answer)".
func TestStallLaggardNamed(t *testing.T) {
	skipShort(t)
	bin := buildProgram(t, "./testdata/collprobe")
	tests := []struct {
		n       int
		backend string
		late    int
	}{
		{2, "tcp", 0},
		{2, "tcp", 1},
		{2, "shm", 0},
		{2, "shm", 1},
		{3, "tcp", 0},
		{3, "tcp", 2},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %d ranks rank %d late", tc.backend, tc.n, tc.late), func(t *testing.T) {
			ws := startProgram(t, bin, tc.n, []string{"GODDP_BACKEND=" + tc.backend, "GODDP_STALL_THRESHOLD=2s", "GODDP_TIMEOUT=30s"},
				"-late", strconv.Itoa(tc.late), "-late-for", "5s")
			began := time.Now()
			for _, w := range ws {
				code, _ := w.wait(t, began, 60*time.Second)
				require.Equal(t, 0, code, "rank %d: %s", w.rank, w.stderr.String())
			}
			for _, w := range ws {
				if w.rank == tc.late {
					continue
				}
				errs := w.stderr.String()
				t.Logf("rank %d: %s", w.rank, strings.TrimSpace(errs))
				assert.Regexp(t, fmt.Sprintf(`(?m)^.*(stall|has waited).*rank %d\b`, tc.late), errs, "rank %d reports the laggard", w.rank)
				assert.NotRegexp(t, `no answer`, errs, "rank %d: the laggard is alive and answers", w.rank)
			}
		})
	}
}
