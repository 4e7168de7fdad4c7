package trainer

import (
	"bufio"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The log writes one JSON object per line, eval results included, keeps the
// records for the plot, and the plot draws eval losses beside training.
func TestMetricsLogRoundTripAndPlot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.jsonl")
	m, err := NewMetricsLog(path)
	require.NoError(t, err)
	want := []MetricsRecord{
		{Kind: KindTrain, Step: 10, Epoch: 0, Loss: 2.3, LR: 0.1, SamplesPerS: 1000, AllReduceHiddenPct: 60, ElapsedS: 1},
		{Kind: KindTrain, Step: 20, Epoch: 0, Loss: 2.1, LR: 0.1, SamplesPerS: 1100, AllReduceHiddenPct: 70, ElapsedS: 2},
		{Kind: KindEpoch, Step: 20, Epoch: 0, Loss: 2.2, LR: 0.1, SamplesPerS: 1050, AllReduceHiddenPct: 65, ElapsedS: 2},
		{Kind: KindEval, Step: 20, Epoch: 0, LR: 0.1, AllReduceHiddenPct: 65, ElapsedS: 2.5,
			Eval: map[string]float64{"loss": 2.0, "accuracy": 0.25}},
	}
	for _, r := range want {
		require.NoError(t, m.Write(r))
	}
	require.NoError(t, m.Close())
	require.Equal(t, want, m.Records())

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var got []MetricsRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r MetricsRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		got = append(got, r)
	}
	require.Equal(t, want, got)

	png1 := filepath.Join(dir, "m.png")
	require.NoError(t, WritePlot(png1, m.Records()))
	pf, err := os.Open(png1)
	require.NoError(t, err)
	defer pf.Close()
	cfg, err := png.DecodeConfig(pf)
	require.NoError(t, err)
	require.Equal(t, 800, cfg.Width)
	require.Equal(t, 700, cfg.Height)

	require.ErrorContains(t, WritePlot(filepath.Join(dir, "m.svg"), want), "only .png")
	require.ErrorContains(t, WritePlot(filepath.Join(dir, "e.png"), want[3:]), "no training records")
	var nilLog *MetricsLog
	require.NoError(t, nilLog.Write(want[0]), "a nil log discards")
	require.NoError(t, nilLog.Close())
}
