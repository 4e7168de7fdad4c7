package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/internal/proctest"
	"github.com/goddp/goddp/models/gpt2"
	"github.com/goddp/goddp/tensor"
)

const gplPath = "/usr/share/common-licenses/GPL-3"

// The README's path for a new corpus at world 2: -tokenize turns the text
// into shards once (local rank 0 writes them, rank 1 waits), both ranks
// train on them, rank 0 prints tokens/s, samples, and writes the weights
// as a Hugging Face file that loads into a new model.
func TestTokenizeTrainSampleWorld2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on 2 ranks")
	}
	if _, err := os.Stat(gplPath); err != nil {
		t.Skipf("%v (the file comes with Debian's base-files package)", err)
	}
	dir := t.TempDir()
	tok, hf := filepath.Join(dir, "gpl"), filepath.Join(dir, "final.safetensors")
	res := proctest.Run(t, proctest.Options{Worker: "rank", World: 2, Timeout: 300 * time.Second,
		Args: []string{"-tokenize", gplPath, "-data", tok, "-val-tokens", "1024",
			"-model", "d2", "-n-embd", "32", "-seq-len", "32", "-batch-size", "2", "-grad-accum", "2", "-warmup-steps", "1",
			"-max-steps", "6", "-eval-every", "3", "-eval-batches", "2", "-ckpt-dir", "", "-progress-every", "0s",
			"-sample", "8", "-save-hf", hf},
		Env: []string{"GODDP_TIMEOUT=120s", "GODDP_NUM_THREADS=1"}})
	proctest.RequireSuccess(t, res)
	out0 := res[0].Stdout
	assert.Equal(t, 1, strings.Count(res[0].Stdout+res[1].Stdout, "tokenized "), "one process per machine tokenizes:\n%s", out0)
	assert.Regexp(t, `tokenized 35149 bytes into \d+ tokens in `+regexp.QuoteMeta(tok), out0)
	assert.Regexp(t, `(?m)^tokens_per_s=\d`, out0)
	assert.Regexp(t, `(?m)^sample: ".+"$`, out0)
	assert.Regexp(t, `(?m)^epoch=0 step=3 test_loss=\d+\.\d+$`, out0, "a language model's evaluation has a loss and no accuracy")
	assert.Contains(t, out0, "wrote "+hf)

	train, val, err := data.OpenTokenSplits(tok, 32)
	require.NoError(t, err)
	defer train.Close()
	defer val.Close()
	assert.EqualValues(t, 1024, val.NumTokens())
	assert.Greater(t, train.NumTokens(), int64(6000))

	m, err := gpt2.New(tensor.NewRNG(9), gpt2.Config{VocabSize: 50257, BlockSize: 32, Layers: 2, Heads: 2, Embd: 32})
	require.NoError(t, err)
	require.NoError(t, m.LoadHF(hf), "the -save-hf file is a Hugging Face GPT-2 of the trained sizes")
}

func TestConfigFromFlags(t *testing.T) {
	for _, c := range []struct {
		o    options
		want gpt2.Config
	}{
		{options{model: "gpt2", padVocab: 128}, gpt2.Config124M.Padded(128)},
		{options{model: "gpt2-medium"}, gpt2.Config350M},
		{options{model: "d12", padVocab: 128}, gpt2.Config124M.Padded(128)}, // llm.c's name for 124M
		{options{model: "d2", embd: 32, seqLen: 64}, gpt2.Config{VocabSize: 50257, BlockSize: 64, Layers: 2, Heads: 2, Embd: 32}},
	} {
		got, err := c.o.config()
		require.NoError(t, err, c.o.model)
		assert.Equal(t, c.want, got, c.o.model)
	}
	for _, bad := range []options{{model: "gpt3"}, {model: "d0"}, {model: "dx"}, {model: "d2", heads: 3}} {
		_, err := bad.config()
		assert.Error(t, err, "%+v", bad)
	}
}

// nanoGPT's count for GPT-2 124M with the padded vocabulary: N without the
// position embeddings, 6N + 12·L·H·Q·T, from a small model's parameters
// by the same formula.
func TestFlopsPerToken(t *testing.T) {
	cfg := gpt2.Config{VocabSize: 97, BlockSize: 16, Layers: 2, Heads: 2, Embd: 8}
	m, err := gpt2.New(tensor.NewRNG(1), cfg)
	require.NoError(t, err)
	n := cfg.NumParams() - 16*8
	assert.Equal(t, float64(6*n+12*2*2*4*16), flopsPerToken(m, cfg))
}
