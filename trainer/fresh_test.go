package trainer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two fresh starts in the same second each get their own directory: the
// second used to meet the first's previous-<time> and refuse to start.
func TestMakeAsideDirSameSecond(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	var got []string
	for range 3 {
		d, err := makeAsideDir(dir, now)
		require.NoError(t, err)
		got = append(got, filepath.Base(d))
	}
	assert.Equal(t, []string{"previous-20261129T070000Z", "previous-20261129T070000Z.2", "previous-20261129T070000Z.3"}, got)

	// A file (not a directory) of the same name is skipped too, and other
	// errors are reported as they are.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "previous-20261129T070001Z"), nil, 0o644))
	d, err := makeAsideDir(dir, now.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, "previous-20261129T070001Z.2", filepath.Base(d))
	_, err = makeAsideDir(filepath.Join(dir, "missing"), now)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Through Main: -fresh twice in a row (well within one second of each
// other on most machines) both start, and both old checkpoints are kept.
func TestMainFreshTwice(t *testing.T) {
	singleProcess(t)
	ck := filepath.Join(t.TempDir(), "ck")
	args := []string{"tiny", "-epochs", "1", "-batch-size", "32", "-save-every", "1", "-ckpt-dir", ck}
	var out bytes.Buffer
	require.Equal(t, 0, Main(args, &out, Defaults{}, tinyJob()), out.String())
	for range 2 {
		out.Reset()
		require.Equal(t, 0, Main(append(args, "-fresh"), &out, Defaults{}, tinyJob()), out.String())
		assert.Contains(t, out.String(), "Fresh start: moved 1 checkpoint files")
	}
	aside, err := filepath.Glob(filepath.Join(ck, "previous-*", "ckpt-e00000000-s000000000008.safetensors"))
	require.NoError(t, err)
	assert.Len(t, aside, 2, "each fresh start kept the checkpoint it moved")
}
