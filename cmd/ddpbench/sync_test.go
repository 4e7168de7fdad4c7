package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

func TestEmbeddedProfiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tensors int
		numel   int64
		first   string
		last    string
		gflops  float64 // backward GFLOP per sample, roughly
	}{
		// torchvision's resnet50(): 161 tensors, 25,557,032 parameters.
		{"resnet50", 161, 25557032, "conv1.weight", "fc.bias", 16.4},
		// GPT-2 small (GPT2Model): 148 tensors, 124,439,808 parameters.
		{"gpt2", 148, 124439808, "wte.weight", "ln_f.bias", 0.57},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadProfile(tc.name)
			require.NoError(t, err)
			assert.Len(t, p.Params, tc.tensors)
			assert.Equal(t, tc.numel, p.numel())
			assert.Equal(t, 4*tc.numel, p.gradBytes())
			assert.Equal(t, tc.first, p.Params[0].Name)
			assert.Equal(t, tc.last, p.Params[len(p.Params)-1].Name)
			var f float64
			for _, q := range p.Params {
				f += q.BackwardFlops
			}
			assert.InEpsilon(t, tc.gflops, f/1e9, 0.02)
			assert.NotEmpty(t, p.FlopsUnit)
		})
	}
	_, err := loadProfile("vgg16")
	assert.Error(t, err)
}

func TestParseProfileErrors(t *testing.T) {
	for _, bad := range []string{
		`{}`, `{"params": [["a"]]}`, `{"params": [["a", [0]]]}`, `{"params": [["a", [2]]], "backward_flops": [1, 2]}`,
		`{"params": [[1, [2]]]}`, `not json`,
	} {
		_, err := parseProfile("bad", []byte(bad))
		assert.Error(t, err, bad)
	}
	p, err := parseProfile("ok", []byte(`{"params": [["a", [2, 3]], ["b", [4]]]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(10), p.numel())
	assert.False(t, p.hasFlops())
}

// TestProfileModelGradients checks the synthetic model: every gradient is x
// (d/dp sum(p*x) = x), they become ready in reverse order, and the compute
// spin runs before each.
func TestProfileModelGradients(t *testing.T) {
	p, err := parseProfile("tiny", []byte(`{"params": [["a", [2, 3]], ["b", [4]], ["c", [1]]]}`))
	require.NoError(t, err)
	m := newProfileModel(p, []time.Duration{0, 2 * time.Millisecond, 0})
	var order []int
	for i, v := range m.params {
		v.RegisterGradReadyHook(func(*autograd.Variable, *autograd.Pass) { order = append(order, i) })
	}
	x := autograd.Const(tensor.Scalar(tensor.Float32, 3))
	start := time.Now()
	require.NoError(t, m.Forward(x).Backward())
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond)
	assert.Equal(t, []int{2, 1, 0}, order)
	for _, v := range m.params {
		for _, g := range v.Grad.F32() {
			assert.Equal(t, float32(3), g)
		}
	}
}

func TestParseSyncArgs(t *testing.T) {
	var errb bytes.Buffer
	for _, bad := range [][]string{
		{"-bucket-cap-mb", "0"}, {"-bucket-cap-mb", "x"}, {"-hook", "int8"}, {"-nproc", "0"}, {"-static-graph", "maybe"},
		{"-compute", "gpu"}, {"-bucket-view", "yes"}, {"-procs", "0"}, {"-overlap", "x"}, {"-inplace", "x"}, {"-compute", "flops", "-gflops", "0"}, {"-format", "xml"}, {"-iters", "0"}, {"extra"},
	} {
		_, err := parseSyncArgs(bad, &errb)
		assert.Error(t, err, "%q", bad)
	}
	c, err := parseSyncArgs([]string{"-bucket-cap-mb", "1,5,25,100", "-backend", "tcp,shm", "-hook", "none,bf16",
		"-static-graph", "false,true", "-nproc", "2,3", "-bucket-view", "true"}, &errb)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 5, 25, 100}, c.caps)
	assert.Equal(t, []string{"tcp", "shm"}, c.backends)
	assert.Equal(t, []string{"none", "bf16"}, c.hooks)
	assert.Equal(t, []bool{false, true}, c.static)
	assert.Equal(t, []int{2, 3}, c.nprocs)
	assert.Equal(t, []bool{true}, c.views)
}

// tinyProfile writes a small profile (a few MB of gradients) for the
// end-to-end runs.
func tinyProfile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tiny.json")
	prof := `{"model": "tiny", "params": [["l0.weight", [1024, 256]], ["l0.bias", [1024]], ["l1.weight", [512, 1024]],
		["l1.bias", [512]], ["l2.weight", [10, 512]], ["l2.bias", [10]]], "backward_flops": [1e6, 1e4, 2e6, 1e4, 1e5, 1e3]}`
	require.NoError(t, os.WriteFile(f, []byte(prof), 0o644))
	return f
}

func TestSyncCSV(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set: ddpbench would join that job instead of spawning ranks")
	}
	prof := tinyProfile(t)
	var out, errb bytes.Buffer
	code := mainWithExitCode([]string{"sync", "-profile", prof, "-backend", "shm,tcp", "-bucket-cap-mb", "0.25,1",
		"-hook", "none,fp16", "-overlap", "true,false", "-inplace", "true,false", "-iters", "3", "-warmup", "1", "-compute", "flops", "-gflops", "10",
		"-format", "csv"}, &out, &errb)
	require.Equal(t, 0, code, "stderr:\n%s", errb.String())
	rows, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err, out.String())
	require.Len(t, rows, 1+2*2*2*2*2, out.String()) // header + backends x hooks x overlap x inplace x caps
	require.Equal(t, syncCSVHeader, strings.Join(rows[0], ","))
	require.True(t, strings.HasPrefix(syncCSVHeader, "profile,backend,bucket_cap_mb,grad_bytes,iter_ms,local_ms,sync_ms,sync_gbps,hidden_pct"))
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	num := func(r []string, k string) float64 {
		v, err := strconv.ParseFloat(r[col[k]], 64)
		require.NoError(t, err, "%s=%q", k, r[col[k]])
		return v
	}
	wantBytes := 4.0 * (1024*256 + 1024 + 512*1024 + 512 + 10*512 + 10)
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		seen[r[col["backend"]]+"/"+r[col["hook"]]+"/"+r[col["bucket_cap_mb"]]+"/"+r[col["overlap"]]+"/"+r[col["in_place"]]] = true
		assert.Equal(t, "tiny", r[col["profile"]])
		assert.Equal(t, wantBytes, num(r, "grad_bytes"))
		assert.Equal(t, 2.0, num(r, "nproc"))
		iter, local, sync := num(r, "iter_ms"), num(r, "local_ms"), num(r, "sync_ms")
		assert.Greater(t, iter, 0.0)
		assert.Greater(t, local, 0.0)
		assert.InDelta(t, iter-local, sync, 0.002)
		if sync > 0 {
			assert.InEpsilon(t, wantBytes/sync/1e6, num(r, "sync_gbps"), 0.01)
		}
		assert.Greater(t, num(r, "comm_ms"), 0.0)
		h := num(r, "hidden_pct")
		assert.True(t, h >= 0 && h <= 100, "hidden_pct %v", h)
		// 3.1 MB of gradients: past the 1 MiB first bucket, l1.weight (2 MiB) fills one alone.
		assert.GreaterOrEqual(t, num(r, "buckets"), 2.0)
	}
	for _, k := range []string{"shm/none/0.25/true/true", "shm/none/0.25/true/false", "shm/fp16/1/false/true", "tcp/none/1/true/false", "tcp/fp16/0.25/false/true"} {
		assert.True(t, seen[k], "missing row %s in\n%s", k, out.String())
	}
}

func TestSyncTableAndPlot(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set")
	}
	png := filepath.Join(t.TempDir(), "sync.png")
	var out, errb bytes.Buffer
	trace := filepath.Join(t.TempDir(), "trace")
	code := mainWithExitCode([]string{"sync", "-profile", tinyProfile(t), "-backend", "shm", "-bucket-cap-mb", "0.25,1,4",
		"-iters", "3", "-warmup", "1", "-static-graph", "true", "-bucket-view", "false,true", "-plot", png,
		"-timeline", trace}, &out, &errb)
	require.Equal(t, 0, code, "stderr:\n%s", errb.String())
	assert.Contains(t, out.String(), "sync_GB/s")
	assert.Equal(t, 3*2, strings.Count(out.String(), "\n  shm "), out.String())
	b, err := os.ReadFile(png)
	require.NoError(t, err)
	assert.Greater(t, len(b), 1000)
	assert.Equal(t, []byte("\x89PNG"), b[:4])
	tl, err := os.ReadFile(trace + ".cap1.none.static.view.json")
	require.NoError(t, err)
	assert.Contains(t, string(tl), "allreduce bucket 0")
}
