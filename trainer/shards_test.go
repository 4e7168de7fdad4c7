package trainer

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMainShardsAndAMP writes the tiny job's training set as shards, trains
// from them (-shards, two loader workers), and trains with -amp bf16.
func TestMainShardsAndAMP(t *testing.T) {
	singleProcess(t)
	dir := t.TempDir()
	var out bytes.Buffer
	require.Equal(t, 0, Main([]string{"tiny", "-batch-size", "32", "-write-shards", dir, "-shard-size", "50", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "wrote 256 samples in 6 shards")
	shards, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	require.NoError(t, err)
	require.Len(t, shards, 6)

	out.Reset()
	require.Equal(t, 0, Main([]string{"tiny", "-shards", filepath.Join(dir, "*.tar"), "-num-workers", "2", "-epochs", "3",
		"-batch-size", "32", "-ckpt-dir", filepath.Join(t.TempDir(), "ck")}, &out, Defaults{}, tinyJob()), out.String())
	losses := regexp.MustCompile(`(?m)^epoch=\d+ loss=(\S+)$`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, losses, 3, out.String())
	first, _ := strconv.ParseFloat(losses[0][1], 64)
	last, _ := strconv.ParseFloat(losses[2][1], 64)
	require.Less(t, last, first, "training from shards did not lower the loss:\n%s", out.String())
	m := samplesRe.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	sps, _ := strconv.ParseFloat(m[1], 64)
	require.Greater(t, sps, 0.0)
	// 256 samples in shards of 50: 6 shards over 2 workers, batches of 32
	// cut per worker: 3 shards of at most 50 each per worker.
	require.Regexp(t, `Steps: \d+`, out.String())

	out.Reset()
	require.Equal(t, 0, Main([]string{"tiny", "-amp", "bf16", "-epochs", "2", "-batch-size", "32", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "amp: bf16 products in 1 layers")

	out.Reset()
	require.Equal(t, 1, Main([]string{"tiny", "-batch-size", "32", "-amp", "int8", "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()))
	out.Reset()
	require.Equal(t, 1, Main([]string{"tiny", "-batch-size", "32", "-shards", filepath.Join(dir, "none-*.npy"), "-ckpt-dir", ""}, &out, Defaults{}, tinyJob()))
}
