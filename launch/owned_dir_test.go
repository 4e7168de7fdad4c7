package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// TestSweepOwnedDirs checks which dirs a sweep removes: those whose owner
// is gone (dead, or its pid recycled), and nothing else: not a live
// owner's, not a locked one (a live owner in another pid namespace), not
// an unowned name, a file, a symlink or a dir made by this process.
func TestSweepOwnedDirs(t *testing.T) {
	dir := t.TempDir()
	me := self()
	require.NotZero(t, me.start, "this test needs /proc")
	dead := deadPid(t)
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Join(p, "attempt_0", "0"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(p, "attempt_0", "0", "error.json"), []byte("{}"), 0o600))
		return p
	}
	gone := []string{
		mk(fmt.Sprintf("ddprun-job-p%d-1-11", dead)),
		mk(fmt.Sprintf("ddprun-a-b-c-p%d-%d-12", dead, me.start)),   // an id with dashes
		mk(fmt.Sprintf("ddprun-job-p%d-%d-13", me.pid, me.start+1)), // a recycled pid
		mk(fmt.Sprintf("ddprun-build-p%d-1-14", dead)),
	}
	locked := mk(fmt.Sprintf("ddprun-job-p%d-1-15", dead))
	f, err := os.Open(locked)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	kept := []string{
		locked,
		mk(fmt.Sprintf("ddprun-job-p%d-%d-16", me.pid, me.start)), // alive
		mk("ddprun-job-17"),                           // an older ddprun's, or logs kept on purpose
		mk(fmt.Sprintf("other-p%d-1-18", dead)),       // not ours
		mk(fmt.Sprintf("ddprun-p%d-1-19", dead)),      // no id: not a name ddprun makes
		mk(fmt.Sprintf("ddprun-job-p%d-1-x20", dead)), // not a MkdirTemp suffix
	}
	file := filepath.Join(dir, fmt.Sprintf("ddprun-job-p%d-1-21", dead))
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	target := mk("target")
	link := filepath.Join(dir, fmt.Sprintf("ddprun-job-p%d-1-22", dead))
	require.NoError(t, os.Symlink(target, link))
	mine, err := makeOwnedDir(dir, "ddprun-job-")
	require.NoError(t, err)
	kept = append(kept, file, target, link, mine.path)

	removed := sweepOwnedDirs(dir, "ddprun-", true)
	assert.ElementsMatch(t, gone, removed)
	for _, p := range gone {
		assert.NoDirExists(t, p)
	}
	for _, p := range kept {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "%s must be kept", p)
	}
	assert.DirExists(t, filepath.Join(target, "attempt_0"), "the sweep does not follow symlinks")

	mine.remove()
	assert.NoDirExists(t, mine.path)
}

// TestRunSweepsStaleTempDirs is issue 24's item 7 for the launcher: the
// temp dirs a launcher killed with SIGKILL leaves (its log dir, a per-run
// build dir, a build's scratch dir in the build cache) are removed by the
// next launcher, which leaves none of its own, and keeps its built binary
// in the build cache for the next run.
func TestRunSweepsStaleTempDirs(t *testing.T) {
	tmp, cache := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := deadPid(t)
	stale := []string{
		filepath.Join(tmp, fmt.Sprintf("ddprun-x1-p%d-1-42", dead)),
		filepath.Join(tmp, fmt.Sprintf("ddprun-build-p%d-1-43", dead)),
		filepath.Join(cache, "worker-0011223344556677", fmt.Sprintf(".build-p%d-1-44", dead)),
	}
	for _, p := range stale {
		require.NoError(t, os.MkdirAll(filepath.Join(p, "sub"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(p, "sub", "big"), make([]byte, 1<<10), 0o600))
	}

	var paths []string
	for range 2 {
		cfg, out, errb := testConfig(2)
		cfg.Program, cfg.BuildCache, cfg.Log = "../testdata/launch/worker", cache, errb
		require.NoError(t, Run(context.Background(), cfg), errb.String())
		assert.Len(t, reports(out.String(), "start"), 2)
		ents, err := os.ReadDir(tmp)
		require.NoError(t, err)
		for _, e := range ents {
			assert.False(t, strings.HasPrefix(e.Name(), "ddprun-"), "%s left in the temp dir", e.Name())
		}
		kept, err := filepath.Glob(filepath.Join(cache, "worker-*", "worker"))
		require.NoError(t, err)
		require.Len(t, kept, 1, "one kept binary")
		paths = append(paths, kept[0])
		scratch, _ := filepath.Glob(filepath.Join(cache, "*", ".build-*"))
		assert.Empty(t, scratch, "no build scratch dir left")
	}
	for _, p := range stale {
		assert.NoDirExists(t, p)
	}
	assert.Equal(t, paths[0], paths[1], "the second run builds onto the same kept binary")
}
