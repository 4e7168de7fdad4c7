package gpt2

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// Conv1D is HF's GPT-2 Conv1D: y = x·W + b with Weight [in, out] (the
// transpose of nn.Linear's [out, in]) and Bias [out]. Its state-dict
// entries are "weight" and "bias" in that layout, so a model's
// nn.StateDict is HF's. On the host at float32 or float64 precision the
// product reads W in that layout (conv1D, as torch's addmm(b, x, W)); bf16
// products and devices run autograd.LinearWith on the weight's transpose
// (see transposed), for their fused kernels.
type Conv1D struct {
	nn.Container
	Weight *autograd.Variable // [in, out]
	Bias   *autograd.Variable // [out]
	// Precision is the product's arithmetic, as nn.Linear's; amp.Autocast
	// sets it through SetPrecision.
	Precision tensor.Precision
}

// NewConv1D returns a float32 Conv1D(in, out) with its weight drawn from
// N(0, std²) by rng and a zero bias, GPT-2's initialisation (HF's
// _init_weights with initializer_range std); a nil rng leaves the weight
// zero, for one that a file fills next.
func NewConv1D(rng *tensor.RNG, in, out int, std float64) *Conv1D {
	w := tensor.New(tensor.Float32, in, out)
	if rng != nil {
		nn.Normal_(rng, w, 0, std)
	}
	return newConv1DFrom(w, tensor.New(tensor.Float32, out))
}

func newConv1DFrom(w, b *tensor.Tensor) *Conv1D {
	c := &Conv1D{Weight: autograd.Param(w), Bias: autograd.Param(b)}
	c.RegisterParameter("weight", c.Weight)
	c.RegisterParameter("bias", c.Bias)
	return c
}

// Forward implements nn.Layer on x [..., in].
func (c *Conv1D) Forward(x *autograd.Variable) *autograd.Variable {
	if y := conv1D(x, c.Weight, c.Bias, c.Precision); y != nil {
		return y
	}
	return autograd.LinearWith(x, transposed(c.Weight), c.Bias, c.Precision)
}

// SetPrecision sets the product's precision and returns the previous one.
func (c *Conv1D) SetPrecision(p tensor.Precision) tensor.Precision {
	old := c.Precision
	c.Precision = p
	return old
}

// Attention is GPT-2's causal self-attention (HF's GPT2Attention): the
// packed q, k, v projection c_attn [C, 3C], heads of C/Heads, the output
// projection c_proj and the attention and residual dropouts.
type Attention struct {
	nn.Container
	CAttn, CProj *Conv1D
	heads        int
	attnDrop     *nn.Dropout // on the attention's probabilities
	residDrop    *nn.Dropout // after c_proj
}

// Forward implements nn.Layer on x [B, T, C]. Without attention dropout
// in effect (eval mode, or Dropout 0, as GPT-2 training recipes run) it is
// one autograd.FlashSelfAttention, the fused causal attention that never
// stores the [B, H, T, T] probabilities (torch's scaled_dot_product_attention
// on its flash backend); with it, the products, softmax and dropout as
// separate ops, as HF's eager attention runs, since the dropout needs the
// probabilities.
func (a *Attention) Forward(x *autograd.Variable) *autograd.Variable {
	qkv := a.CAttn.Forward(x)
	var y *autograd.Variable
	if a.attnDrop.Training() && a.attnDrop.P > 0 {
		y = attentionWithDropout(qkv, a.heads, a.attnDrop)
	} else {
		y = autograd.FlashSelfAttention(qkv, a.heads, autograd.AttentionOptions{Causal: true, Precision: a.CProj.Precision})
	}
	return a.residDrop.Forward(a.CProj.Forward(y))
}

// attentionWithDropout is SelfAttention's causal attention with dropout
// on the probabilities: softmax(q·kᵀ/√D, causal) → dropout → ·v.
func attentionWithDropout(qkv *autograd.Variable, heads int, drop *nn.Dropout) *autograd.Variable {
	sh := qkv.Shape()
	b, t, c := sh[0], sh[1], sh[2]/3
	d := c / heads
	split := autograd.Split(qkv, c, 2)
	hd := func(v *autograd.Variable) *autograd.Variable { // [B, T, C] → [B, H, T, D]
		return autograd.Permute(autograd.Reshape(v, b, t, heads, d), 0, 2, 1, 3)
	}
	q, k, v := hd(split[0]), hd(split[1]), hd(split[2])
	s := autograd.Scale(autograd.MatMul(q, autograd.Transpose(k, -2, -1)), 1/math.Sqrt(float64(d)))
	mask := tensor.Triu(tensor.Ones(qkv.Value.DType(), t, t), 1)
	p := drop.Forward(autograd.Softmax(autograd.MaskedFill(s, mask, math.Inf(-1)), -1))
	y := autograd.MatMul(p, v) // [B, H, T, D]
	return autograd.Reshape(autograd.Permute(y, 0, 2, 1, 3), b, t, c)
}

// MLP is GPT-2's feed-forward block: c_fc [C, 4C], GELU's tanh
// approximation, c_proj [4C, C], dropout.
type MLP struct {
	nn.Container
	CFc, CProj *Conv1D
	drop       *nn.Dropout
}

// Forward implements nn.Layer.
func (m *MLP) Forward(x *autograd.Variable) *autograd.Variable {
	return m.drop.Forward(m.CProj.Forward(GELUTanh(m.CFc.Forward(x))))
}

// Block is GPT-2's pre-LayerNorm transformer block (HF's GPT2Block):
//
//	x = x + attn(ln_1(x))
//	x = x + mlp(ln_2(x))
type Block struct {
	nn.Container
	Ln1, Ln2 *nn.LayerNorm
	Attn     *Attention
	MLP      *MLP
}

// Forward implements nn.Layer.
func (b *Block) Forward(x *autograd.Variable) *autograd.Variable {
	x = autograd.Add(x, b.Attn.Forward(b.Ln1.Forward(x)))
	return autograd.Add(x, b.MLP.Forward(b.Ln2.Forward(x)))
}

// Transformer is HF's GPT2Model: token and position embeddings, dropout,
// the blocks and the final LayerNorm.
type Transformer struct {
	nn.Container
	WTE, WPE *nn.Embedding // [PaddedVocab, C], [BlockSize, C]
	H        *nn.Sequential
	LnF      *nn.LayerNorm
	drop     *nn.Dropout
}

// Model is GPT-2 with its language-model head (HF's GPT2LMHeadModel): the
// head is transformer.wte.weight itself (weight tying), so the model has
// no lm_head parameter and its state dict no lm_head.weight key, as HF's
// saved files. Build one with New; Forward gives the logits and Loss the
// training loss.
type Model struct {
	nn.Container
	Config      Config
	Transformer *Transformer
	// headPrecision is the head's product precision (SetPrecision).
	headPrecision tensor.Precision
	pos           []int // 0, 1, ..., BlockSize-1: the positions' rows of wpe
}

// New builds a float32 GPT-2 of cfg, initialised as GPT-2 is (HF's
// _init_weights and nanoGPT's): every Conv1D weight and both embeddings
// from N(0, 0.02²), the two residual projections of each block (attn.c_proj
// and mlp.c_proj) from N(0, (0.02/√(2·Layers))²), biases zero, LayerNorms
// one and zero. The draws come from rng in the parameters' order (wte,
// wpe, then each block's c_attn, attn.c_proj, c_fc, mlp.c_proj), the
// padded rows of wte included (nanoGPT draws its 50304 rows alike). The
// dropouts draw their masks from rng too, as torch's global generator
// serves both.
func New(rng *tensor.RNG, cfg Config) (*Model, error) {
	if rng == nil {
		return nil, fmt.Errorf("%w: New needs an RNG", ErrConfig)
	}
	return build(rng, cfg)
}

// build is New where a nil rng leaves every weight zero (a model that a
// file fills next) and the dropouts draw from a generator seeded 0.
func build(rng *tensor.RNG, cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dropRNG := rng
	if dropRNG == nil {
		dropRNG = tensor.NewRNG(0)
	}
	const std = 0.02
	residStd := std / math.Sqrt(2*float64(cfg.Layers))
	C := cfg.Embd
	tr := &Transformer{}
	tr.WTE = embedding(rng, cfg.PaddedVocab(), C, std)
	tr.WPE = embedding(rng, cfg.BlockSize, C, std)
	tr.drop = nn.NewDropout(dropRNG, cfg.Dropout)
	tr.H = nn.NewSequential()
	for range cfg.Layers {
		b := &Block{Ln1: layerNorm(C, cfg), Ln2: layerNorm(C, cfg)}
		b.Attn = &Attention{heads: cfg.Heads,
			CAttn: NewConv1D(rng, C, 3*C, std), CProj: NewConv1D(rng, C, C, residStd),
			attnDrop: nn.NewDropout(dropRNG, cfg.Dropout), residDrop: nn.NewDropout(dropRNG, cfg.Dropout)}
		b.Attn.RegisterModule("c_attn", b.Attn.CAttn)
		b.Attn.RegisterModule("c_proj", b.Attn.CProj)
		b.Attn.RegisterModule("attn_dropout", b.Attn.attnDrop)
		b.Attn.RegisterModule("resid_dropout", b.Attn.residDrop)
		b.MLP = &MLP{CFc: NewConv1D(rng, C, 4*C, std), CProj: NewConv1D(rng, 4*C, C, residStd), drop: nn.NewDropout(dropRNG, cfg.Dropout)}
		b.MLP.RegisterModule("c_fc", b.MLP.CFc)
		b.MLP.RegisterModule("c_proj", b.MLP.CProj)
		b.MLP.RegisterModule("dropout", b.MLP.drop)
		b.RegisterModule("ln_1", b.Ln1)
		b.RegisterModule("attn", b.Attn)
		b.RegisterModule("ln_2", b.Ln2)
		b.RegisterModule("mlp", b.MLP)
		tr.H.Append(b)
	}
	tr.LnF = layerNorm(C, cfg)
	tr.RegisterModule("wte", tr.WTE)
	tr.RegisterModule("wpe", tr.WPE)
	tr.RegisterModule("drop", tr.drop)
	tr.RegisterModule("h", tr.H)
	tr.RegisterModule("ln_f", tr.LnF)
	m := &Model{Config: cfg, Transformer: tr, pos: make([]int, cfg.BlockSize)}
	for i := range m.pos {
		m.pos[i] = i
	}
	m.RegisterModule("transformer", tr)
	return m, nil
}

func embedding(rng *tensor.RNG, num, dim int, std float64) *nn.Embedding {
	w := tensor.New(tensor.Float32, num, dim)
	if rng != nil {
		nn.Normal_(rng, w, 0, std)
	}
	return &nn.Embedding{Weight: autograd.Param(w)}
}

func layerNorm(dim int, cfg Config) *nn.LayerNorm {
	ln := nn.NewLayerNorm(dim)
	ln.Eps = cfg.eps()
	return ln
}

// Block returns block i (transformer.h.i).
func (m *Model) Block(i int) *Block { return m.Transformer.H.At(i).(*Block) }

// Hidden returns the final LayerNorm's output [B, T, C] for token ids idx
// [B, T] (an int64 tensor, or floats holding whole numbers; T at most
// BlockSize): what the head multiplies, HF's GPT2Model output.
func (m *Model) Hidden(idx *autograd.Variable) *autograd.Variable {
	sh := idx.Shape()
	if len(sh) != 2 {
		panic(fmt.Sprintf("gpt2: token ids of shape %v, want [B, T]", sh))
	}
	if t := sh[1]; t > m.Config.BlockSize || t == 0 {
		panic(fmt.Sprintf("gpt2: a sequence of %d tokens; the model takes 1 to BlockSize = %d", t, m.Config.BlockSize))
	}
	tr := m.Transformer
	x := autograd.Add(tr.WTE.Forward(idx), tr.WPE.Lookup(m.pos[:sh[1]]))
	x = tr.H.Forward(tr.drop.Forward(x))
	return tr.LnF.Forward(x)
}

// Forward implements nn.Layer: token ids [B, T] to logits [B, T,
// PaddedVocab], the hidden states times wteᵀ (the tied head, no bias).
// The padded columns are logits like the others (nanoGPT's); Generate
// never picks them.
func (m *Model) Forward(idx *autograd.Variable) *autograd.Variable {
	return autograd.LinearWith(m.Hidden(idx), m.Transformer.WTE.Weight, nil, m.headPrecision)
}

// SetPrecision sets the tied head's product precision and returns the
// previous one: amp.Autocast calls it on the model itself, as on each
// Conv1D below it.
func (m *Model) SetPrecision(p tensor.Precision) tensor.Precision {
	old := m.headPrecision
	m.headPrecision = p
	return old
}

// IgnoreIndex is the target that Loss skips, nanoGPT's ignore_index=-1.
const IgnoreIndex = -1

// Loss returns the mean cross-entropy of logits [B, T, V] (Forward's)
// against targets [B, T], an int64 tensor of token ids, where a target
// of IgnoreIndex counts neither in the sum nor in the mean. As in nanoGPT,
// the padded vocabulary's columns take part in the softmax (llm.c masks
// them): training pushes their logits down, since no target is ever one
// of them. On a device the cross-entropy kernel takes no ignored target
// (it panics naming it); token shards have none.
func (m *Model) Loss(logits *autograd.Variable, targets *tensor.Tensor) *autograd.Variable {
	v := logits.Shape()[logits.Value.Dim()-1]
	ignore := IgnoreIndex
	return autograd.CrossEntropyWith(autograd.Reshape(logits, -1, v), targets,
		autograd.CrossEntropyOptions{Reduction: autograd.ReductionMean, IgnoreIndex: &ignore})
}
