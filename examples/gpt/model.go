package main

import (
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// Block is the anchor's pre-LayerNorm transformer block:
//
//	x = x + proj(attention(qkv(ln1(x))))   (causal, heads of d/h)
//	x = x + fc2(gelu(fc1(ln2(x))))
//
// with the anchor's attribute names, so the state_dict keys match torch's
// (blocks.0.ln1.weight, blocks.0.qkv.weight, ...). The attention runs as one
// autograd.SelfAttention over the packed qkv projection.
type Block struct {
	nn.Container
	heads     int
	ln1, ln2  *nn.LayerNorm
	qkv, proj *nn.Linear
	fc1, fc2  *nn.Linear
}

// NewBlock builds a Block of width d with h heads and a 4d MLP, drawing the
// Linear weights from rng in torch's construction order.
func NewBlock(rng *tensor.RNG, d, h int) *Block {
	b := &Block{heads: h, ln1: nn.NewLayerNorm(d), ln2: nn.NewLayerNorm(d)}
	b.qkv, b.proj = nn.NewLinear(rng, d, 3*d), nn.NewLinear(rng, d, d)
	b.fc1, b.fc2 = nn.NewLinear(rng, d, 4*d), nn.NewLinear(rng, 4*d, d)
	b.RegisterModule("ln1", b.ln1)
	b.RegisterModule("ln2", b.ln2)
	b.RegisterModule("qkv", b.qkv)
	b.RegisterModule("proj", b.proj)
	b.RegisterModule("fc1", b.fc1)
	b.RegisterModule("fc2", b.fc2)
	return b
}

// Forward implements nn.Layer on x [B, T, d].
func (b *Block) Forward(x *autograd.Variable) *autograd.Variable {
	// The attention's products run at the projections' precision
	// (amp.Autocast lowers both to bf16, as torch's autocast does bmm).
	y := autograd.SelfAttention(b.qkv.Forward(b.ln1.Forward(x)), b.heads, autograd.AttentionOptions{Causal: true, Precision: b.proj.Precision})
	x = autograd.Add(x, b.proj.Forward(y))
	return autograd.Add(x, b.fc1.ForwardGELULinear(b.fc2, b.ln2.Forward(x))) // fc2(gelu(fc1(·))) as one op
}

// GPT is the anchor's decoder-only transformer: token and learned position
// embeddings, a stack of Blocks, a final LayerNorm and a Linear head giving
// logits [B, T, vocab].
type GPT struct {
	nn.Container
	ctx      int
	tok, pos *nn.Embedding
	blocks   *nn.Sequential
	ln       *nn.LayerNorm
	head     *nn.Linear
	posIdx   []int
}

// NewGPT builds the model; the anchor's is NewGPT(rng, vocab, 64, 128, 4, 2).
func NewGPT(rng *tensor.RNG, vocab, ctx, d, heads, layers int) *GPT {
	g := &GPT{ctx: ctx, tok: nn.NewEmbedding(rng, vocab, d), pos: nn.NewEmbedding(rng, ctx, d)}
	g.blocks = nn.NewSequential()
	for range layers {
		g.blocks.Append(NewBlock(rng, d, heads))
	}
	g.ln, g.head = nn.NewLayerNorm(d), nn.NewLinear(rng, d, vocab)
	g.RegisterModule("tok", g.tok)
	g.RegisterModule("pos", g.pos)
	g.RegisterModule("blocks", g.blocks)
	g.RegisterModule("ln", g.ln)
	g.RegisterModule("head", g.head)
	g.posIdx = make([]int, ctx)
	for i := range g.posIdx {
		g.posIdx[i] = i
	}
	return g
}

// Forward implements nn.Layer: token ids [B, T] (whole numbers stored as
// floats, T <= ctx) to logits [B, T, vocab].
func (g *GPT) Forward(idx *autograd.Variable) *autograd.Variable {
	t := idx.Shape()[1]
	x := autograd.Add(g.tok.Forward(idx), g.pos.Lookup(g.posIdx[:t]))
	return g.head.Forward(g.ln.Forward(g.blocks.Forward(x)))
}
