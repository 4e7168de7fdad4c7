package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/proctest"
	"github.com/goddp/goddp/models/gpt2"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

// TestMain lets a test re-run this binary as one rank of the example
// (internal/proctest); the rank's flags are its arguments.
func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"rank": func() error {
		if rc := run(append([]string{"gpt2"}, os.Args[1:]...), os.Stdout); rc != 0 {
			return fmt.Errorf("gpt2 exited with %d", rc)
		}
		return nil
	}})
}

// torchFixture is scripts/torch_gpt2_ddp.py's output; its config (the
// script's flags) is read as a map.
type torchFixture struct {
	Torch      string         `json:"torch"`
	Config     map[string]any `json:"config"`
	InitDigest string         `json:"init_digest"`
	Losses     []float64      `json:"losses"`
	LRs        []float64      `json:"lrs"`
}

func loadTorchFixture(t *testing.T) (torchFixture, map[string]any) {
	b, err := os.ReadFile("testdata/torch_ddp.json")
	require.NoError(t, err)
	var f torchFixture
	require.NoError(t, json.Unmarshal(b, &f))
	return f, f.Config
}

func cfgInt(t *testing.T, c map[string]any, k string) int {
	v, ok := c[k].(float64)
	require.True(t, ok, "fixture config has no %s", k)
	return int(v)
}

// writeCounterInit builds the fixture's model in Go, gives it the anchor's
// counter-based weights, checks that they are torch's (the digest) and
// writes them as a Hugging Face safetensors file, the file both sides
// start from.
func writeCounterInit(t *testing.T, c map[string]any, digest, path string) {
	layers := cfgInt(t, c, "layers")
	m, err := gpt2.New(tensor.NewRNG(0), gpt2.Config{VocabSize: cfgInt(t, c, "vocab"), BlockSize: cfgInt(t, c, "ctx"),
		Layers: layers, Heads: cfgInt(t, c, "heads"), Embd: cfgInt(t, c, "d")})
	require.NoError(t, err)
	sd := nn.StateDict(m)
	require.NoError(t, counterInit(sd, layers, uint64(cfgInt(t, c, "init_seed"))))
	got, err := initDigest(sd, layers)
	require.NoError(t, err)
	require.Equal(t, digest, got, "the counter-based init differs from scripts/torch_gpt2_ddp.py's")
	require.NoError(t, m.SaveHF(path))
}

// Issue 45's bar: GPT-2 (2 layers, width 64, 4 heads, the full 50257-token
// vocabulary, context 64) trained by examples/gpt2 at world 2 with gradient
// accumulation 2, clipping at 1.0, AdamW with decay on matrices only and
// nanoGPT's warm-up + cosine schedule takes the same 30 steps as torch 1.13
// DDP (scripts/torch_gpt2_ddp.py, testdata/torch_ddp.json): rank 0's loss
// (the mean of its two micro-batches) within 1e-5 relative at every step.
// Both start from one safetensors file (the Go side writes it; its
// weights' digest is torch's) and read the same llm.c token shard (GPL-3's
// first 4097 GPT-2 tokens: 64 windows, 4 optimizer steps an epoch).
func TestMatchesTorchDDP(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 30 steps on 2 ranks")
	}
	fix, c := loadTorchFixture(t)
	dir := t.TempDir()
	init := filepath.Join(dir, "init.safetensors")
	writeCounterInit(t, c, fix.InitDigest, init)
	metrics := filepath.Join(dir, "m.jsonl")
	steps := cfgInt(t, c, "steps")
	args := []string{"-data", "testdata", "-init", init, "-pad-vocab", "0",
		"-n-layer", fmt.Sprint(cfgInt(t, c, "layers")), "-n-head", fmt.Sprint(cfgInt(t, c, "heads")),
		"-n-embd", fmt.Sprint(cfgInt(t, c, "d")), "-seq-len", fmt.Sprint(cfgInt(t, c, "ctx")),
		"-batch-size", fmt.Sprint(cfgInt(t, c, "batch")), "-grad-accum", fmt.Sprint(cfgInt(t, c, "accum")),
		"-clip", fmt.Sprint(c["clip"]), "-lr", fmt.Sprint(c["lr"]), "-min-lr", fmt.Sprint(c["min_lr"]),
		"-warmup-steps", fmt.Sprint(cfgInt(t, c, "warmup_steps")), "-lr-decay-steps", fmt.Sprint(cfgInt(t, c, "decay_steps")),
		"-weight-decay", fmt.Sprint(c["weight_decay"]), "-seed", fmt.Sprint(cfgInt(t, c, "seed")),
		"-epochs", "100", "-max-steps", fmt.Sprint(steps), "-ckpt-dir", "",
		"-metrics", metrics, "-metrics-every", "1", "-eval-batches", "1"}
	res := proctest.Run(t, proctest.Options{Worker: "rank", World: cfgInt(t, c, "world"), Timeout: 600 * time.Second,
		Args: args, Env: []string{"GODDP_TIMEOUT=300s", "GODDP_NUM_THREADS=1"}})
	proctest.RequireSuccess(t, res)

	f, err := os.Open(metrics)
	require.NoError(t, err)
	defer f.Close()
	recs, err := trainer.ReadJSONLines(f)
	require.NoError(t, err)
	var losses, lrs []float64
	for _, r := range recs {
		if r.Kind == trainer.KindTrain {
			losses = append(losses, r.Loss)
			lrs = append(lrs, r.LR)
		}
	}
	require.Len(t, losses, steps)
	worst := 0.0
	for i := range losses {
		worst = max(worst, math.Abs(losses[i]-fix.Losses[i])/math.Abs(fix.Losses[i]))
	}
	t.Logf("%d steps at world 2: loss %.6f -> %.6f (torch %.6f -> %.6f), worst relative difference %.3g",
		steps, losses[0], losses[steps-1], fix.Losses[0], fix.Losses[steps-1], worst)
	for i := range losses {
		require.InEpsilon(t, fix.Losses[i], losses[i], 1e-5, "step %d: goddp %v\ntorch %v", i+1, losses, fix.Losses)
	}
	for i := range lrs {
		require.InEpsilon(t, fix.LRs[i], lrs[i], 1e-9, "step %d's learning rate", i+1)
	}
}
