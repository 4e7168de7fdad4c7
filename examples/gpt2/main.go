// Command gpt2 trains GPT-2 (models/gpt2) on GPT-2 token shards with DDP,
// with nanoGPT's and llm.c's recipe: AdamW (beta2 0.95, weight decay 0.1
// on matrices only), linear warm-up then cosine decay, gradient clipping
// at 1.0, gradient accumulation (-grad-accum), and the validation loss
// every -eval-every steps. Rank 0 prints tokens/s and, given the device's
// peak (-peak-tflops on a CPU), the model FLOPs utilisation.
//
// The data are token files: llm.c's shards (PREFIX_val_000000.bin,
// PREFIX_train_000001.bin, ... as cmd/tokenize writes them) or nanoGPT's
// train.bin and val.bin, in -data. With -tokenize, text files are turned
// into shards there first (local rank 0 writes them; the other ranks of
// the machine wait), unless -data already holds token files:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/gpt2 \
//	    -tokenize /usr/share/dictd/gcide.dict.dz -data data/gcide \
//	    -model d6 -seq-len 256 -batch-size 4 -grad-accum 4 -max-steps 2000
//
// -model names GPT-2's sizes (gpt2 = 124M, gpt2-medium, gpt2-large,
// gpt2-xl) or a small one, dL (L layers, width 64·L, L heads, as
// llm.c's d12 names GPT-2 124M); -n-layer, -n-head, -n-embd override.
// -init starts from weights: a Hugging Face safetensors file
// (model.safetensors of "gpt2") or an llm.c model file (gpt2_124M.bin),
// whose sizes it takes. Checkpoints (-ckpt-dir) hold the model under
// Hugging Face's names and layout; -save-hf writes the final weights as a
// file HF's GPT2LMHeadModel loads. -sample N prints N tokens generated
// from -prompt at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	_ "github.com/goddp/goddp/devices" // registers cuda and sim: -device cuda, sim, sim:N
	"github.com/goddp/goddp/models/gpt2"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/tokenizer"
	"github.com/goddp/goddp/trainer"
)

func main() { os.Exit(run(os.Args, os.Stdout)) }

// options are the example's own flags.
type options struct {
	data, tokenize, model, init string
	layers, heads, embd         int
	seqLen, padVocab, valTokens int
	dropout                     float64
	sample, topK                int
	temperature                 float64
	prompt, saveHF              string
}

func (o *options) define(fs *flag.FlagSet) {
	fs.StringVar(&o.data, "data", "data/gpt2", "token files: a directory or glob of llm.c shards (*_train_*.bin, *_val_*.bin) or nanoGPT's train.bin and val.bin")
	fs.StringVar(&o.tokenize, "tokenize", "", "comma-separated text files (or globs; gzip and dictzip too) to tokenize into -data first, when -data holds no token files")
	fs.IntVar(&o.valTokens, "val-tokens", 1<<20, "tokens -tokenize puts in the validation shard (shard 0)")
	fs.StringVar(&o.model, "model", "gpt2", "size: gpt2 (124M), gpt2-medium (350M), gpt2-large (774M), gpt2-xl (1558M), or dL (L layers of width 64·L, L heads)")
	fs.IntVar(&o.layers, "n-layer", 0, "layers (0: -model's)")
	fs.IntVar(&o.heads, "n-head", 0, "attention heads (0: -model's)")
	fs.IntVar(&o.embd, "n-embd", 0, "width (0: -model's)")
	fs.IntVar(&o.seqLen, "seq-len", 0, "tokens per sequence T, also the context length (0: -model's, 1024)")
	fs.IntVar(&o.padVocab, "pad-vocab", 128, "pad the vocabulary's 50257 rows to a multiple of this (128: 50304, as nanoGPT and llm.c; 0: no padding)")
	fs.Float64Var(&o.dropout, "dropout", 0, "dropout probability (0 for pretraining, as nanoGPT and llm.c)")
	fs.StringVar(&o.init, "init", "", "start from these weights: a Hugging Face .safetensors file or an llm.c model .bin (its sizes replace -model's)")
	fs.IntVar(&o.sample, "sample", 0, "after training, rank 0 prints this many tokens generated from -prompt")
	fs.StringVar(&o.prompt, "prompt", "\n", "the text -sample continues")
	fs.IntVar(&o.topK, "top-k", 40, "-sample draws from the k likeliest tokens (1: greedy)")
	fs.Float64Var(&o.temperature, "temperature", 1, "-sample's temperature (0: greedy)")
	fs.StringVar(&o.saveHF, "save-hf", "", "after training, rank 0 writes the weights to this Hugging Face safetensors file")
}

// recipe is nanoGPT's GPT-2 recipe (train_gpt2.py's and config/
// train_gpt2.py's values) but for the warm-up, which is shorter because an
// example's runs are: the flags change every value.
func recipe() *trainer.Recipe {
	r := trainer.DefaultRecipe()
	r.Optim, r.LR, r.MinLR, r.WeightDecay, r.Beta1, r.Beta2, r.Eps = "adamw", 6e-4, 6e-5, 0.1, 0.9, 0.95, 1e-8
	r.Schedule, r.WarmupSteps, r.Clip = "cosine", 100, 1
	return &r
}

func run(args []string, out io.Writer) int {
	var o options
	var model *gpt2.Model
	var train, val *data.TokenDataset
	defer func() {
		for _, d := range []*data.TokenDataset{train, val} {
			if d != nil {
				d.Close()
			}
		}
	}()
	defaults := trainer.Defaults{Epochs: 1, BatchSize: 4, EvalBatchSize: -1, Flags: o.define, Recipe: recipe()}
	code := trainer.Main(args, out, defaults, func(rng *tensor.RNG) (trainer.Job, error) {
		cfg, err := o.config()
		if err != nil {
			return trainer.Job{}, err
		}
		if o.tokenize != "" {
			if err := tokenizeOnce(context.Background(), o.data, o.tokenize, o.valTokens, out); err != nil {
				return trainer.Job{}, err
			}
		}
		if train, val, err = data.OpenTokenSplits(o.data, cfg.BlockSize, data.TokensVocab(cfg.VocabSize)); err != nil {
			return trainer.Job{}, fmt.Errorf("gpt2: %w (make token files with -tokenize or cmd/tokenize)", err)
		}
		if model, err = gpt2.New(rng, cfg); err != nil {
			return trainer.Job{}, err
		}
		if err := o.loadInit(model); err != nil {
			return trainer.Job{}, err
		}
		m := model
		return trainer.Job{
			Name:        "gpt2",
			Dataset:     train,
			EvalDataset: val,
			Model:       m,
			Loss:        func(logits *autograd.Variable, b data.Batch) *autograd.Variable { return m.Loss(logits, b.Targets) },
			// nanoGPT's model(idx, targets): the tied head and the
			// cross-entropy as one op, whose softmax and gradient reuse
			// the logits' buffer (the same loss as Forward then Loss).
			ForwardLoss:     func(idx *autograd.Variable, b data.Batch) *autograd.Variable { return m.ForwardLoss(idx, b.Targets) },
			DropLast:        true,
			TokensPerSample: cfg.BlockSize,
			FlopsPerToken:   flopsPerToken(m, cfg),
		}, nil
	})
	if code != 0 || model == nil || envInt("RANK", 0) != 0 {
		return code
	}
	if o.saveHF != "" {
		if err := model.SaveHF(o.saveHF); err != nil {
			fmt.Fprintf(os.Stderr, "gpt2: %v\n", err)
			return 1
		}
		fmt.Fprintf(out, "wrote %s\n", o.saveHF)
	}
	if o.sample > 0 {
		if err := sample(out, model, o); err != nil {
			fmt.Fprintf(os.Stderr, "gpt2: %v\n", err)
			return 1
		}
	}
	return code
}

// config is -model's sizes with the flags' overrides, or an llm.c -init
// file's sizes.
func (o *options) config() (gpt2.Config, error) {
	var cfg gpt2.Config
	switch name := o.model; {
	case strings.HasSuffix(o.init, ".bin"):
		c, err := gpt2.ReadLLMCConfig(o.init)
		if err != nil {
			return c, err
		}
		cfg = c
	case name == "gpt2":
		cfg = gpt2.Config124M
	case name == "gpt2-medium":
		cfg = gpt2.Config350M
	case name == "gpt2-large":
		cfg = gpt2.Config774M
	case name == "gpt2-xl":
		cfg = gpt2.Config1558M
	case strings.HasPrefix(name, "d"):
		l, err := strconv.Atoi(name[1:])
		if err != nil || l < 1 {
			return cfg, fmt.Errorf("gpt2: -model %q: want gpt2, gpt2-medium, gpt2-large, gpt2-xl or dL (L layers, e.g. d12)", name)
		}
		cfg = gpt2.Config{VocabSize: 50257, BlockSize: 1024, Layers: l, Heads: l, Embd: 64 * l}
	default:
		return cfg, fmt.Errorf("gpt2: -model %q: want gpt2, gpt2-medium, gpt2-large, gpt2-xl or dL (L layers, e.g. d12)", name)
	}
	for _, f := range []struct {
		v   int
		dst *int
	}{{o.layers, &cfg.Layers}, {o.heads, &cfg.Heads}, {o.embd, &cfg.Embd}, {o.seqLen, &cfg.BlockSize}} {
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	if o.padVocab > 0 && cfg.PaddedVocabSize == 0 {
		cfg = cfg.Padded(o.padVocab)
	}
	cfg.Dropout = o.dropout
	return cfg, cfg.Validate()
}

// loadInit loads -init into m: llm.c's file by its .bin suffix, else a
// Hugging Face safetensors file.
func (o *options) loadInit(m *gpt2.Model) error {
	switch {
	case o.init == "":
		return nil
	case strings.HasSuffix(o.init, ".bin"):
		return m.LoadLLMC(o.init)
	default:
		return m.LoadHF(o.init)
	}
}

// flopsPerToken is nanoGPT's 6N + 12·L·H·Q·T with N the parameters but the
// position embeddings (get_num_params(non_embedding=True)); the tied head
// counts once, in wte.
func flopsPerToken(m *gpt2.Model, cfg gpt2.Config) float64 {
	n := 0
	for _, p := range nn.Parameters(m) {
		n += p.Value.Numel()
	}
	n -= cfg.BlockSize * cfg.Embd
	return trainer.FlopsPerToken(int64(n), cfg.Layers, cfg.Heads, cfg.Embd/cfg.Heads, cfg.BlockSize)
}

// sample prints o.sample tokens generated from o.prompt.
func sample(out io.Writer, m *gpt2.Model, o options) error {
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		return err
	}
	prompt, err := tok.Encode(o.prompt)
	if err != nil {
		return err
	}
	ids, err := m.Generate(prompt, gpt2.SampleOptions{MaxNewTokens: o.sample, Temperature: o.temperature, TopK: o.topK, Seed: 1})
	if err != nil {
		return err
	}
	text, err := tok.Decode(ids)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sample: %q\n", o.prompt+text)
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
