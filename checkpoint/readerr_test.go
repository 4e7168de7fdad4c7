package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/commtest"
)

// unreadable makes path a checkpoint name whose reading fails with an I/O
// error, not with damage. The tests run as root, for whom a mode-000 file
// is still readable (CAP_DAC_OVERRIDE), so permission bits cannot give
// EACCES here; these give the same class of error to root: open fails
// (ELOOP, a symlink to itself: where EACCES or ESTALE fail), or open
// succeeds and read fails (EISDIR, a symlink to a directory: where EIO
// fails). Both reach Latest as an error from os.ReadFile, the path EACCES
// takes. The e2e suite produces a real EACCES (e2e/ckptdir_test.go).
var unreadable = []struct {
	name  string
	errno syscall.Errno
	make  func(t *testing.T, path string)
}{
	{"open fails (ELOOP)", syscall.ELOOP, func(t *testing.T, path string) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Symlink(filepath.Base(path), path))
	}},
	{"read fails (EISDIR)", syscall.EISDIR, func(t *testing.T, path string) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Symlink(t.TempDir(), path))
	}},
}

// TestLatestStopsAtUnreadableFile is issue 24's item 3: an unreadable newest
// checkpoint was skipped like a corrupt one, so a resume rolled training
// back to an older checkpoint, and the next Save pruned the unreadable file
// as if it were invalid. Now Latest (and LoadLatestAndBroadcast, on every
// rank) fails naming the file, and Save neither prunes past it nor deletes
// it.
func TestLatestStopsAtUnreadableFile(t *testing.T) {
	for _, tc := range unreadable {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := NewManager(dir, Keep(2))
			require.NoError(t, err)
			defer m.Close()
			saveAll(t, m, [2]int{1, 10}, [2]int{2, 20}, [2]int{3, 30})
			newest := m.Path(3, 30)
			tc.make(t, newest)
			listed, err := m.List()
			require.NoError(t, err)
			require.Equal(t, []string{newest, m.Path(2, 20)}, listed)

			f, err := m.Latest()
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.errno)
			assert.NotErrorIs(t, err, ErrNotFound)
			assert.NotErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), newest)
			assert.Nil(t, f.Checkpoint, "no fallback to an older checkpoint")

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pgs := commtest.NewGroups(2, commtest.WithTimeout(10*time.Second))
			errs := make([]error, len(pgs))
			var wg sync.WaitGroup
			for r, pg := range pgs {
				wg.Go(func() {
					c, err := LoadLatestAndBroadcast(ctx, pg, m)
					assert.Nil(t, c, "rank %d loaded a checkpoint", r)
					errs[r] = err
				})
			}
			wg.Wait()
			require.ErrorIs(t, errs[0], tc.errno)
			require.ErrorIs(t, errs[1], ErrRemote)
			for r, err := range errs {
				assert.NotErrorIs(t, err, ErrNotFound, "rank %d would start fresh", r)
				assert.Contains(t, err.Error(), newest, "rank %d", r)
			}

			// A save named before the unreadable file neither removes it nor
			// prunes, even with Keep(1): Latest would stop at it, so it
			// counts as newer.
			require.NoError(t, m.Close())
			m, err = NewManager(dir, Keep(1))
			require.NoError(t, err)
			defer m.Close()
			p, err := m.Save(fullCheckpoint(2, 25))
			require.ErrorIs(t, err, ErrShadowed)
			assert.Contains(t, err.Error(), newest)
			after, err := m.List()
			require.NoError(t, err)
			assert.Equal(t, []string{newest, p, m.Path(2, 20)}, after, "nothing deleted")
			_, err = os.Lstat(newest)
			assert.NoError(t, err)
		})
	}
}
