package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
)

// defaultCkptDir is examples/linear's -ckpt-dir default: relative, so two
// jobs started in one directory share it.
const defaultCkptDir = "checkpoints/linear"

// ckptDirState describes every entry of dir (name, mode, size, mtime and,
// for a readable regular file, SHA-256), to show that nothing in it
// changed; with skipLock the lock file, whose holder record every run that
// takes the lock rewrites, is left out.
func ckptDirState(t *testing.T, dir string, skipLock bool) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if skipLock && e.Name() == checkpoint.LockName {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		var sum [32]byte
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o444 != 0 {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			sum = sha256.Sum256(b)
		}
		out = append(out, fmt.Sprintf("%s %v %d %d %x", e.Name(), fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sum))
	}
	sort.Strings(out)
	return out
}

// stopMidSave watches ck and, the moment a temporary checkpoint file
// appears (inotify) once a complete checkpoint exists, stops pid (SIGSTOP);
// if the file is still there the save is under way and pid stays stopped,
// else it goes on and the next save is tried. It returns the temporary
// file's name.
func stopMidSave(t *testing.T, j *job, creates <-chan string, ck string, pid int) string {
	t.Helper()
	tries := 0
	deadline := time.After(30 * time.Second)
	for {
		var name string
		select {
		case name = <-creates:
		case <-deadline:
			t.Fatalf("no save caught in 30s (%d tries)\n%s", tries, j.stderr.String())
		case <-j.done:
			t.Fatalf("job ended (exit %d) before a save was caught (%d tries)\n%s", j.code, tries, j.stderr.String())
		}
		if !isTempName(name) || len(completeCheckpoints(t, ck)) < 1 {
			continue
		}
		tries++
		signal(t, pid, syscall.SIGSTOP)
		waitStopped(t, pid)
		if _, err := os.Stat(filepath.Join(ck, name)); err == nil {
			t.Logf("stopped in the middle of writing %s (caught on try %d)", name, tries)
			return name
		}
		signal(t, pid, syscall.SIGCONT)
	}
}

// TestTwoJobsOneCheckpointDir is issue 24's item 1: two jobs started in one
// directory share the default, relative -ckpt-dir. The second used to
// resume from the first's checkpoints, remove the temporary file of its save
// under way (the first then failed with "rename ... no such file or
// directory") and overwrite its same-named checkpoints. Now the second job
// is refused before training, every rank exiting within seconds with an
// error naming the directory and the pid of the first job's rank 0, and not
// one file of the first job changes: checked with the first job's rank 0
// stopped in the middle of a save, its temporary file present. The first
// job then completes that save and goes on.
func TestTwoJobsOneCheckpointDir(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, defaultCkptDir)
	require.NoError(t, os.MkdirAll(ck, 0o755))
	creates := watchCreates(t, ck)
	first := start(t, spec{dir: dir, args: []string{"-epochs", "100000", "-save-every", "1"},
		env: []string{"GODDP_TIMEOUT=30s"}})
	ws := first.workers(2, 0, 30*time.Second)
	inFlight := stopMidSave(t, first, creates, ck, ws[0])
	before := ckptDirState(t, ck, false)
	require.Contains(t, strings.Join(before, "\n"), inFlight)

	second := start(t, spec{dir: dir, args: []string{"-epochs", "3", "-save-every", "1"},
		env: []string{"GODDP_TIMEOUT=10s"}})
	code, took := second.wait(30 * time.Second)
	require.Equal(t, 1, code, "the second job must fail\nstdout:\n%s\nstderr:\n%s", second.stdout.String(), second.stderr.String())
	second.requireNoLeftovers()
	errText := second.stderr.String()
	t.Logf("second job refused in %v:\n%s", took.Round(time.Millisecond), errText)
	assert.Contains(t, errText, "checkpoint: directory locked by another job")
	assert.Contains(t, errText, ck, "names the directory")
	assert.Regexp(t, fmt.Sprintf(`pid %d\b`, ws[0]), errText, "names the first job's rank 0")
	assert.NotContains(t, second.stdout.String(), "Epoch 0", "refused before training")
	assert.Less(t, took, 15*time.Second, "every rank of the refused job exits promptly")
	assert.Equal(t, before, ckptDirState(t, ck, false), "the second job changed the first job's files")

	// The first job finishes the save it was stopped in and goes on.
	target := strings.TrimPrefix(inFlight[:strings.LastIndex(inFlight, ".tmp-")], ".")
	saves := strings.Count(first.stdout.String(), "Training checkpoint saved")
	signal(t, ws[0], syscall.SIGCONT)
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(first.stdout.String(), "Training checkpoint saved") < saves+3 {
		select {
		case <-first.done:
			t.Fatalf("the first job ended (exit %d)\nstderr:\n%s", first.code, first.stderr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the first job stopped saving\nstderr:\n%s", first.stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	assert.Contains(t, first.stdout.String(), "Training checkpoint saved at "+filepath.Join(defaultCkptDir, target))
	// Stop the first job before reading its checkpoints: while it runs it
	// saves every epoch and deletes all but the newest three, so a file
	// listed here could be gone by the time it is opened.
	signal(t, first.cmd.Process.Pid, syscall.SIGTERM)
	first.wait(30 * time.Second)
	for _, p := range completeCheckpoints(t, ck) {
		_, err := checkpoint.Load(p)
		assert.NoError(t, err, "the first job's checkpoint %s", p)
	}
	assert.NotContains(t, first.stderr.String(), "no such file or directory")
	first.requireNoLeftovers()
}

const capSetPCap = 8 // CAP_SETPCAP, linux/capability.h

// hasCapability reports whether this process's effective set holds cap.
func hasCapability(t *testing.T, cap uint) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			return eff&(1<<cap) != 0
		}
	}
	return false
}

// TestUnreadableNewestCheckpoint is issue 24's item 3: a resume over a
// newest checkpoint it cannot read (EACCES here; EIO or ESTALE on NFS take
// the same path) used to skip it as corrupt, rename it FILE.corrupt and roll
// back an epoch, after which pruning deleted older files. Now every rank
// fails naming the file and the error, and nothing is renamed or deleted;
// once the file is readable again the job resumes from it.
//
// The permission is real: as root (CAP_DAC_OVERRIDE ignores mode 000) the
// workers run under testdata/nodac, which drops the capabilities that
// bypass file permissions before it execs examples/linear.
func TestUnreadableNewestCheckpoint(t *testing.T) {
	skipShort(t)
	if os.Geteuid() == 0 && !hasCapability(t, capSetPCap) {
		t.Skip("running as root without CAP_SETPCAP: testdata/nodac cannot drop CAP_DAC_OVERRIDE, so chmod 000 gives no EACCES")
	}
	dir := t.TempDir()
	ck := filepath.Join(dir, defaultCkptDir)
	run := func(epochs int) *job {
		sp := spec{dir: dir, args: []string{"-epochs", fmt.Sprint(epochs), "-save-every", "1"}, env: []string{"GODDP_TIMEOUT=10s"}}
		if os.Geteuid() == 0 {
			sp.program = buildProgram(t, "./testdata/nodac")
			sp.args = append([]string{linearBin}, sp.args...)
		}
		return start(t, sp)
	}
	j := run(4)
	code, _ := j.wait(30 * time.Second)
	require.Equal(t, 0, code, j.stderr.String())
	files := completeCheckpoints(t, ck)
	require.Len(t, files, 3)
	newest := files[0]
	require.Equal(t, 3, epochOf(t, newest))
	require.NoError(t, os.Chmod(newest, 0))
	before := ckptDirState(t, ck, true)

	r := run(6)
	code, _ = r.wait(30 * time.Second)
	require.Equal(t, 1, code, "the resume must fail\nstdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
	r.requireNoLeftovers()
	errText := r.stderr.String()
	t.Logf("resume refused:\n%s", errText)
	rel := filepath.Join(defaultCkptDir, filepath.Base(newest))
	assert.Regexp(t, regexp.QuoteMeta("cannot read "+rel)+`.*permission denied`, errText, "names the file and the error")
	assert.NotContains(t, r.stdout.String(), "Resumed from")
	assert.NotContains(t, r.stdout.String(), "Skipped checkpoint")
	assert.NotContains(t, r.stdout.String(), "Epoch 0")
	assert.Equal(t, before, ckptDirState(t, ck, true), "nothing renamed or deleted")

	require.NoError(t, os.Chmod(newest, 0o644))
	again := run(5)
	code, _ = again.wait(30 * time.Second)
	require.Equal(t, 0, code, again.stderr.String())
	assert.Contains(t, again.stdout.String(), "Resumed from epoch 3 ")
}
