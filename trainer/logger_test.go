package trainer

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var sampleRecords = []Record{
	{Kind: KindTrain, Step: 10, Epoch: 0, Loss: 2.3, LR: 0.1, SamplesPerS: 1000, AllReduceHiddenPct: 60, ElapsedS: 1},
	{Kind: KindTrain, Step: 20, Epoch: 0, Loss: 2.1, LR: 0.1, SamplesPerS: 1100, AllReduceHiddenPct: 70, ElapsedS: 2},
	{Kind: KindEpoch, Step: 20, Epoch: 0, Loss: 2.2, LR: 0.1, SamplesPerS: 1050, AllReduceHiddenPct: 65, ElapsedS: 2,
		Ranks: []RankComm{{Rank: 0, HiddenPct: 65, WaitMs: 0.25, CommMs: 0.7}, {Rank: 1, HiddenPct: 61, WaitMs: 0.3, CommMs: 0.75}}},
	{Kind: KindEval, Step: 20, Epoch: 0, LR: 0.1, AllReduceHiddenPct: 65, ElapsedS: 2.5,
		Eval: map[string]float64{"loss": 2.0, "acc": 0.25, "f1": 0.5}},
}

func TestJSONLinesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	j, err := CreateJSONLines(path)
	require.NoError(t, err)
	for _, r := range sampleRecords {
		require.NoError(t, j.Log(r))
	}
	// Each line is flushed as it is logged: readable before Close.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	got, err := ReadJSONLines(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, sampleRecords, got)
	require.NoError(t, j.Close())
	require.NoError(t, j.Close(), "a second Close is harmless")

	_, err = ReadJSONLines(bytes.NewReader([]byte("{\"kind\":\"train\"}\nnot json\n")))
	require.ErrorContains(t, err, "line 2")
}

func TestCSVRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	c := NewCSV(&buf, "loss", "acc")
	for _, r := range sampleRecords {
		require.NoError(t, c.Log(r))
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"kind", "step", "epoch", "loss", "lr", "samples_per_s", "allreduce_hidden_pct", "elapsed_s",
		"eval_loss", "eval_acc"}, rows[0])
	require.Len(t, rows, 1+len(sampleRecords))
	num := func(s string) float64 {
		t.Helper()
		if s == "" {
			return -1
		}
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		return v
	}
	for i, want := range sampleRecords {
		row := rows[i+1]
		require.Equal(t, want.Kind, row[0])
		require.Equal(t, strconv.Itoa(want.Step), row[1])
		require.Equal(t, strconv.Itoa(want.Epoch), row[2])
		require.Equal(t, want.LR, num(row[4]))
		require.Equal(t, want.AllReduceHiddenPct, num(row[6]))
		require.Equal(t, want.ElapsedS, num(row[7]))
		if want.Kind == KindEval {
			require.Empty(t, row[3], "an eval record has no training loss")
			require.Empty(t, row[5])
			require.Equal(t, want.Eval["loss"], num(row[8]))
			require.Equal(t, want.Eval["acc"], num(row[9]))
			continue
		}
		require.Equal(t, want.Loss, num(row[3]))
		require.Equal(t, want.SamplesPerS, num(row[5]))
		require.Empty(t, row[8])
		require.Empty(t, row[9])
	}
}

func TestPlotLogger(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.png")
	p, err := NewPlot(path)
	require.NoError(t, err)
	for _, r := range sampleRecords {
		require.NoError(t, p.Log(r))
	}
	require.NoError(t, p.Close())
	pf, err := os.Open(path)
	require.NoError(t, err)
	defer pf.Close()
	cfg, err := png.DecodeConfig(pf)
	require.NoError(t, err)
	require.Equal(t, 800, cfg.Width)
	require.Equal(t, 700, cfg.Height)

	_, err = NewPlot(filepath.Join(dir, "m.svg"))
	require.ErrorContains(t, err, "only .png")
	require.ErrorContains(t, WritePlot(filepath.Join(dir, "e.png"), sampleRecords[3:]), "no training records")
}
