package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Save writes the file once while hashing it (writeOnePass, then the
// digest patched in); the bytes are those of the two-pass encoding, for
// tensors larger than a hash chunk too, and the file verifies on load.
func TestSaveOnePassMatchesTwoPass(t *testing.T) {
	rng := tensor.NewRNG(3)
	ts := map[string]*tensor.Tensor{
		"big":   tensor.Rand(rng, tensor.Float32, ChecksumChunk/4+123), // spans two chunks
		"small": tensor.Rand(rng, tensor.Float64, 3, 5),
		"ids":   tensor.FromI64([]int64{1, -2, 3}, 3),
		"empty": tensor.New(tensor.Float32, 0),
	}
	meta := map[string]string{"epoch": "2"}
	want, err := EncodeSafetensors(ts, meta)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, SaveSafetensors(path, ts, meta))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	back, _, err := LoadSafetensors(path)
	require.NoError(t, err)
	require.Equal(t, ts["big"].F32(), back["big"].F32())
}
