package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/trainer"
)

// TestMetricsLogAndPlot is issue 19's bar: examples/mlp with
// -metrics m.jsonl -plot m.png writes valid JSON lines with step, epoch,
// loss, lr, samples/s and all-reduce hidden %, and a PNG of at least 400x300.
func TestMetricsLogAndPlot(t *testing.T) {
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	dir := t.TempDir()
	metrics, plot := filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "m.png")
	var out bytes.Buffer
	rc := trainer.Main([]string{"mlp", "-epochs", "2", "-metrics", metrics, "-plot", plot, "-metrics-every", "16"},
		&out, defaults, build)
	require.Equal(t, 0, rc, "output:\n%s", out.String())
	require.Contains(t, out.String(), "[cpu0] Epoch 1 | Batchsize: 64 | Steps: 128", "the epoch line names the device")

	f, err := os.Open(metrics)
	require.NoError(t, err)
	defer f.Close()
	kinds := map[string]int{}
	lastStep := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &raw), "line %q", sc.Text())
		for _, field := range []string{"kind", "step", "epoch", "loss", "lr", "samples_per_s", "allreduce_hidden_pct", "elapsed_s"} {
			require.Contains(t, raw, field, "line %q", sc.Text())
		}
		var r trainer.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		kinds[r.Kind]++
		require.GreaterOrEqual(t, r.Step, lastStep, "steps only grow")
		lastStep = r.Step
		require.Equal(t, 0.01, r.LR)
		require.Greater(t, r.Loss, 0.0)
		require.Less(t, r.Loss, 10.0)
		require.Greater(t, r.SamplesPerS, 0.0)
		require.GreaterOrEqual(t, r.AllReduceHiddenPct, 0.0)
		require.LessOrEqual(t, r.AllReduceHiddenPct, 100.0)
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 2*128/16, kinds[trainer.KindTrain], "a train record every 16 of 128 steps, 2 epochs")
	require.Equal(t, 2, kinds[trainer.KindEpoch])
	require.Equal(t, 256, lastStep)

	pf, err := os.Open(plot)
	require.NoError(t, err)
	defer pf.Close()
	cfg, err := png.DecodeConfig(pf)
	require.NoError(t, err, "a valid PNG")
	require.GreaterOrEqual(t, cfg.Width, 400)
	require.GreaterOrEqual(t, cfg.Height, 300)
}
