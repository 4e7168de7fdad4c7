package gpt2

import (
	"errors"
	"fmt"
)

// ErrConfig is wrapped by Config.Validate's errors.
var ErrConfig = errors.New("gpt2: bad config")

// Config is a GPT-2's sizes, HF GPT2Config's fields under Go names
// (n_positions, n_layer, n_head, n_embd, vocab_size) plus the padded
// vocabulary of nanoGPT and llm.c.
type Config struct {
	// VocabSize is the tokenizer's vocabulary, 50257 for GPT-2's BPE.
	VocabSize int
	// PaddedVocabSize is the number of rows of transformer.wte.weight and
	// the logits' width: 0 means VocabSize. nanoGPT and llm.c pad GPT-2's
	// 50257 to 50304 (a multiple of 128) so the head's product runs on
	// whole tiles; the extra rows are never the id of a token, and only
	// HF's files leave them out (see LoadHF, HFStateDict).
	PaddedVocabSize int
	// BlockSize is the context length (HF n_positions): rows of
	// transformer.wpe.weight and the longest sequence Forward takes.
	BlockSize int
	Layers    int // n_layer
	Heads     int // n_head; Embd must divide by it
	Embd      int // n_embd, the width C
	// Dropout is the probability of the three dropouts of GPT-2 (HF's
	// embd_pdrop after the embeddings' sum, attn_pdrop on the attention's
	// probabilities, resid_pdrop after each c_proj), nanoGPT's single
	// `dropout`. The presets have 0, what nanoGPT and llm.c pretrain
	// with; HF's GPT2Config defaults to 0.1 (fine-tuning).
	Dropout float64
	// LayerNormEps is every LayerNorm's eps (HF layer_norm_epsilon); 0
	// means 1e-5, GPT-2's.
	LayerNormEps float64
}

// The GPT-2 family's sizes (HF's gpt2, gpt2-medium, gpt2-large, gpt2-xl),
// vocabulary unpadded. Use Padded for nanoGPT's and llm.c's 50304.
var (
	Config124M  = Config{VocabSize: 50257, BlockSize: 1024, Layers: 12, Heads: 12, Embd: 768}
	Config350M  = Config{VocabSize: 50257, BlockSize: 1024, Layers: 24, Heads: 16, Embd: 1024}
	Config774M  = Config{VocabSize: 50257, BlockSize: 1024, Layers: 36, Heads: 20, Embd: 1280}
	Config1558M = Config{VocabSize: 50257, BlockSize: 1024, Layers: 48, Heads: 25, Embd: 1600}
)

// Padded returns c with its vocabulary padded to the next multiple of
// multiple (128 gives GPT-2's 50257 → 50304, llm.c's pad_vocab).
func (c Config) Padded(multiple int) Config {
	if multiple > 0 {
		c.PaddedVocabSize = (c.VocabSize + multiple - 1) / multiple * multiple
	}
	return c
}

// PaddedVocab returns the number of rows of wte: PaddedVocabSize, or
// VocabSize where it is 0.
func (c Config) PaddedVocab() int {
	if c.PaddedVocabSize == 0 {
		return c.VocabSize
	}
	return c.PaddedVocabSize
}

func (c Config) eps() float64 {
	if c.LayerNormEps == 0 {
		return 1e-5
	}
	return c.LayerNormEps
}

// Validate reports the first size that cannot make a GPT-2.
func (c Config) Validate() error {
	switch {
	case c.VocabSize <= 0:
		return fmt.Errorf("%w: VocabSize %d must be positive", ErrConfig, c.VocabSize)
	case c.PaddedVocabSize != 0 && c.PaddedVocabSize < c.VocabSize:
		return fmt.Errorf("%w: PaddedVocabSize %d is below VocabSize %d", ErrConfig, c.PaddedVocabSize, c.VocabSize)
	case c.BlockSize <= 0:
		return fmt.Errorf("%w: BlockSize %d must be positive", ErrConfig, c.BlockSize)
	case c.Layers <= 0:
		return fmt.Errorf("%w: Layers %d must be positive", ErrConfig, c.Layers)
	case c.Heads <= 0 || c.Embd <= 0:
		return fmt.Errorf("%w: Heads %d and Embd %d must be positive", ErrConfig, c.Heads, c.Embd)
	case c.Embd%c.Heads != 0:
		return fmt.Errorf("%w: Embd %d does not divide into %d heads", ErrConfig, c.Embd, c.Heads)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("%w: Dropout %v outside [0, 1)", ErrConfig, c.Dropout)
	case c.LayerNormEps < 0:
		return fmt.Errorf("%w: LayerNormEps %v is negative", ErrConfig, c.LayerNormEps)
	}
	return nil
}

// NumParams returns the number of parameters the model built from c has,
// the tied head counted once: wte (padded rows included), wpe, 12·C² +
// 13·C per layer (ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj with
// their biases) and ln_f. GPT-2 124M: 124,439,808; padded to 50304,
// 124,475,904.
func (c Config) NumParams() int {
	C := c.Embd
	return c.PaddedVocab()*C + c.BlockSize*C + c.Layers*(12*C*C+13*C) + 2*C
}
