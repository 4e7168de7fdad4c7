package trainer

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
)

// dirState describes every entry of dir (name, mode, size, mtime and, for
// regular files, SHA-256), to show that nothing in it changed.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		var sum [32]byte
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			sum = sha256.Sum256(b)
		}
		out = append(out, fmt.Sprintf("%s %v %d %d %x", e.Name(), fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sum))
	}
	sort.Strings(out)
	return out
}

// checkpointFiles drops the lock file from a dirState: its holder record is
// rewritten by every run that takes the lock.
func checkpointFiles(state []string) []string {
	var out []string
	for _, s := range state {
		if !strings.HasPrefix(s, checkpoint.LockName+" ") {
			out = append(out, s)
		}
	}
	return out
}

// TestSecondJobRefused is issue 24's item 1 in the trainer: a second job
// started on the checkpoint directory of a running one (both with the same
// relative -ckpt-dir) used to resume from the first job's checkpoints and
// overwrite them. Now every rank of the second job fails in New, before
// training, with an error naming the directory and the pid that holds it,
// and the directory is untouched.
func TestSecondJobRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	first := newWorld(t, ctx, dir, 1, mse)
	requireBuilt(t, first)
	for _, err := range train(ctx, first, 2) {
		require.NoError(t, err)
	}
	before := dirState(t, dir)

	began := time.Now()
	second := newWorld(t, ctx, dir, 1, mse)
	took := time.Since(began)
	for r := range second {
		require.Error(t, second[r].err, "rank %d of the second job", r)
		assert.Contains(t, second[r].err.Error(), dir, "rank %d", r)
		assert.Contains(t, second[r].err.Error(), fmt.Sprintf("pid %d", os.Getpid()), "rank %d", r)
	}
	// Rank 1 gives rank 0 a head start of 3 s to exit (a launcher stops it
	// sooner), no more.
	assert.Less(t, took, 10*time.Second)
	assert.Equal(t, before, dirState(t, dir), "the second job changed the directory")

	// The first job still holds the directory and saves.
	errs := make([]error, len(first))
	var wg sync.WaitGroup
	for r := range first {
		wg.Go(func() { errs[r] = first[r].t.SaveCheckpoint(ctx, 1) })
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestResumeFailsOnUnreadable is issue 24's item 3 in the trainer: an
// unreadable newest checkpoint used to be skipped as corrupt and renamed
// FILE.corrupt, and the run rolled back to the one before. Now every rank
// fails naming the file, and nothing is renamed or deleted. (Root reads a
// mode-000 file, so the file is made a symlink to itself: open fails with
// ELOOP, as it would with EACCES; the e2e suite uses a real EACCES.)
func TestResumeFailsOnUnreadable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	rs := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 5) {
		require.NoError(t, err)
	}
	closeWorld(rs)
	newest := filepath.Join(dir, "ckpt-e00000004-s000000000020.safetensors")
	require.NoError(t, os.Remove(newest))
	require.NoError(t, os.Symlink(filepath.Base(newest), newest))
	before := checkpointFiles(dirState(t, dir))

	again := newWorld(t, ctx, dir, 2, mse)
	for r := range again {
		require.Error(t, again[r].err, "rank %d resumed", r)
		assert.Contains(t, again[r].err.Error(), newest, "rank %d", r)
		assert.Contains(t, again[r].err.Error(), "too many levels of symbolic links", "rank %d", r)
	}
	assert.NotContains(t, again[0].out.String(), "Resumed from")
	assert.Equal(t, before, checkpointFiles(dirState(t, dir)), "nothing renamed or deleted")
}
