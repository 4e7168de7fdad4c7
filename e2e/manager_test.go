package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/tensor"
)

// TestManagerKeepsValidCheckpointsBehindCorruptOnes guards a
// checkpoint.Manager bug this suite found (fixed in 16cd25e, "prune counts
// only checkpoints that load").
//
// A run resumes from the newest valid checkpoint (epoch 5) of a directory
// whose newer files (epochs 10 and 15) are corrupt, as Manager.Latest
// documents. Its first save (epoch 6) used to prune by file name only, so the
// two unreadable files counted as the newest of the Keep(3) and the valid
// epoch 5 and epoch 0 checkpoints were deleted: one valid checkpoint left
// where three were promised, and the one just resumed from gone.
func TestManagerKeepsValidCheckpointsBehindCorruptOnes(t *testing.T) {
	dir := t.TempDir()
	m, err := checkpoint.NewManager(dir, checkpoint.Keep(3))
	require.NoError(t, err)
	save := func(epoch int) string {
		p, err := m.Save(&checkpoint.Checkpoint{Epoch: epoch, Step: 10 * epoch,
			Model: map[string]*tensor.Tensor{"w": tensor.FromF32([]float32{float32(epoch)}, 1)}})
		require.NoError(t, err)
		return p
	}
	e0, e5 := save(0), save(5)
	for _, e := range []int{10, 15} { // damaged on disk (or cut short by a copy)
		require.NoError(t, os.WriteFile(m.Path(e, 10*e), []byte("corrupt"), 0o644))
	}
	require.Len(t, completeCheckpoints(t, dir), 4)

	f, err := m.Latest()
	require.NoError(t, err)
	require.Equal(t, e5, f.Path, "resume from the newest valid checkpoint")
	require.Len(t, f.Skipped, 2)

	e6 := save(6) // the resumed run's first save
	for _, p := range []string{e0, e5, e6} {
		_, err := checkpoint.Load(p)
		assert.NoError(t, err, "valid checkpoint %s was pruned while unreadable newer files were kept", filepath.Base(p))
	}
}
