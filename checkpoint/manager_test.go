package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// saveAll saves one checkpoint per (epoch, step) pair through m, failing the
// test on any error.
func saveAll(t *testing.T, m *Manager, es ...[2]int) {
	t.Helper()
	for _, e := range es {
		_, err := m.Save(fullCheckpoint(e[0], e[1]))
		require.NoError(t, err)
	}
}

// TestManagerSaveNeverDeletesItsOwnFile is issue 17's bar: with Keep(2) and
// two newer-named valid checkpoints in the directory, a Save either keeps
// the file it reports or returns an error. It keeps it and returns
// ErrShadowed, and deletes none of the newer files.
func TestManagerSaveNeverDeletesItsOwnFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keep  int
		epoch int
	}{
		{"fresh run in a used directory", 2, 0},
		{"rollback to an older checkpoint", 2, 2},
		{"keep 1", 1, 0},
		{"keep all", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old, err := NewManager(dir, Keep(2))
			require.NoError(t, err)
			saveAll(t, old, [2]int{3, 30}, [2]int{4, 40})
			require.NoError(t, old.Close(), "that run ended: its lock is released")

			m, err := NewManager(dir, Keep(tc.keep))
			require.NoError(t, err)
			p, err := m.Save(fullCheckpoint(tc.epoch, 5))
			assert.Equal(t, m.Path(tc.epoch, 5), p, "the path is reported even with the error")
			require.ErrorIs(t, err, ErrShadowed)
			assert.Contains(t, err.Error(), m.Path(4, 40), "names the newest shadowing file")
			assert.Contains(t, err.Error(), p)

			c, err := Load(p)
			require.NoError(t, err, "the reported file must exist and load")
			assert.Equal(t, tc.epoch, c.Epoch)
			ls, err := m.List()
			require.NoError(t, err)
			assert.Equal(t, []string{m.Path(4, 40), m.Path(3, 30), p}, ls, "nothing was deleted")

			// Once the newer files are moved away, saving prunes normally
			// and the run's own checkpoints are what Latest resumes from.
			require.NoError(t, os.Rename(m.Path(4, 40), filepath.Join(t.TempDir(), "a")))
			require.NoError(t, os.Rename(m.Path(3, 30), filepath.Join(t.TempDir(), "b")))
			saveAll(t, m, [2]int{tc.epoch, 6}, [2]int{tc.epoch, 7})
			ls, err = m.List()
			require.NoError(t, err)
			want := []string{m.Path(tc.epoch, 7), m.Path(tc.epoch, 6), m.Path(tc.epoch, 5)}
			if tc.keep > 0 {
				want = want[:tc.keep]
			}
			assert.Equal(t, want, ls)
			f, err := m.Latest()
			require.NoError(t, err)
			assert.Equal(t, 7, f.Checkpoint.Step)
		})
	}
}

// TestManagerInvalidNewerFilesDoNotShadow checks that only files Latest
// would resume from block pruning: a corrupt newer-named file is skipped
// by Latest, so the save goes on and prunes as usual.
func TestManagerInvalidNewerFilesDoNotShadow(t *testing.T) {
	m, err := NewManager(t.TempDir(), Keep(2))
	require.NoError(t, err)
	saveAll(t, m, [2]int{1, 10}, [2]int{1, 20})
	require.NoError(t, os.WriteFile(m.Path(9, 90), []byte("garbage"), 0o644))

	p, err := m.Save(fullCheckpoint(1, 30))
	require.NoError(t, err)
	_, err = Load(p)
	require.NoError(t, err)
	ls, err := m.List()
	require.NoError(t, err)
	assert.Equal(t, []string{m.Path(9, 90), p, m.Path(1, 20)}, ls,
		"the corrupt file stays for inspection inside the window; the oldest valid one goes")
	f, err := m.Latest()
	require.NoError(t, err)
	assert.Equal(t, p, f.Path)
}

// TestManagerResaveSameName overwrites a checkpoint of the same (epoch,
// step), as a run resumed from it does; that is not a shadowing save.
func TestManagerResaveSameName(t *testing.T) {
	m, err := NewManager(t.TempDir(), Keep(2))
	require.NoError(t, err)
	saveAll(t, m, [2]int{1, 10}, [2]int{1, 20}, [2]int{1, 20})
	ls, err := m.List()
	require.NoError(t, err)
	assert.Equal(t, []string{m.Path(1, 20), m.Path(1, 10)}, ls)
}
