package nn

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// MultiheadAttention is torch's nn.MultiheadAttention(embed_dim, num_heads,
// bias, batch_first) without dropout, kdim/vdim or add_bias_kv. Its
// parameters have torch's layout and state_dict keys: in_proj_weight [3E, E]
// (the query, key and value projections stacked), in_proj_bias [3E],
// out_proj.weight [E, E] and out_proj.bias [E].
//
// Self-attention (query, key and value the same variable, as Forward does)
// projects once to [N, L, 3E] and runs autograd.SelfAttention, which reads
// the heads in place; cross-attention projects query, key and value
// separately and runs autograd.ScaledDotProductAttention over [N, H, L, E/H]
// views.
type MultiheadAttention struct {
	Container
	EmbedDim, NumHeads int
	BatchFirst         bool
	InProjWeight       *autograd.Variable // [3E, E]
	InProjBias         *autograd.Variable // [3E] or nil
	OutProj            *Linear
}

// MultiheadAttentionConfig holds the constructor's optional arguments; the
// zero value is torch's defaults (bias=True, batch_first=False).
type MultiheadAttentionConfig struct {
	NoBias     bool // torch's bias=False: no in_proj_bias and no out_proj.bias
	BatchFirst bool // inputs and output are [N, L, E] instead of [L, N, E]
}

// NewMultiheadAttention returns a float32 MultiheadAttention initialised as
// torch's _reset_parameters does: out_proj.weight from Linear's init
// U(-1/√E, 1/√E), in_proj_weight from xavier_uniform, U(±√(6/(E+3E))), and
// both biases zero. embedDim must be divisible by numHeads.
func NewMultiheadAttention(rng *tensor.RNG, embedDim, numHeads int, cfg MultiheadAttentionConfig) *MultiheadAttention {
	if embedDim <= 0 || numHeads <= 0 || embedDim%numHeads != 0 {
		panic(fmt.Sprintf("nn: MultiheadAttention(%d, %d): embed_dim must be positive and divisible by num_heads", embedDim, numHeads))
	}
	e := embedDim
	out := newLinear(rng, e, e, !cfg.NoBias)
	if out.Bias != nil {
		clear(out.Bias.Value.F32())
	}
	bound := math.Sqrt(6 / float64(e+3*e))
	w := rng.Uniform(tensor.Float32, -bound, bound, 3*e, e)
	var b *tensor.Tensor
	if !cfg.NoBias {
		b = tensor.New(tensor.Float32, 3*e)
	}
	return NewMultiheadAttentionFrom(numHeads, w, b, out, cfg.BatchFirst)
}

// NewMultiheadAttentionFrom wraps existing tensors: inProjWeight [3E, E],
// inProjBias [3E] or nil, and the output projection, for fixed weights or
// float64 models.
func NewMultiheadAttentionFrom(numHeads int, inProjWeight, inProjBias *tensor.Tensor, outProj *Linear, batchFirst bool) *MultiheadAttention {
	s := inProjWeight.Shape()
	if len(s) != 2 || s[0] != 3*s[1] || numHeads <= 0 || s[1]%numHeads != 0 {
		panic(fmt.Sprintf("nn: MultiheadAttention: in_proj_weight shape %v with %d heads (want [3E, E], E divisible by heads)", s, numHeads))
	}
	e := s[1]
	if inProjBias != nil && (inProjBias.Dim() != 1 || inProjBias.Size(0) != 3*e) {
		panic(fmt.Sprintf("nn: MultiheadAttention: in_proj_bias shape %v, want [%d]", inProjBias.Shape(), 3*e))
	}
	if outProj.InFeatures() != e || outProj.OutFeatures() != e {
		panic(fmt.Sprintf("nn: MultiheadAttention: out_proj is %dx%d, want %dx%d", outProj.OutFeatures(), outProj.InFeatures(), e, e))
	}
	m := &MultiheadAttention{EmbedDim: e, NumHeads: numHeads, BatchFirst: batchFirst,
		InProjWeight: autograd.Param(inProjWeight), OutProj: outProj}
	m.RegisterParameter("in_proj_weight", m.InProjWeight)
	if inProjBias != nil {
		m.InProjBias = autograd.Param(inProjBias)
		m.RegisterParameter("in_proj_bias", m.InProjBias)
	}
	m.RegisterModule("out_proj", outProj)
	return m
}

// AttendOptions are the masks of MultiheadAttention.Attend (torch's forward
// arguments). Bool masks are 0/1 tensors where 1 (True in torch) means "may
// not attend".
type AttendOptions struct {
	// AttnMask is a float mask added to the scores, [L, S] or [N·H, L, S].
	AttnMask *tensor.Tensor
	// AttnMaskBool is a bool mask of the same shapes as AttnMask.
	AttnMaskBool *tensor.Tensor
	// KeyPaddingMask [N, S] (or [S] for unbatched input) is a bool mask of
	// keys to ignore (padding).
	KeyPaddingMask *tensor.Tensor
	// Causal masks key j for query i when j > i (torch 2's is_causal; the
	// same as AttnMaskBool = Triu(Ones(L, S), 1)) without computing them.
	Causal bool
}

// Forward implements Layer: self-attention of x ([N, L, E] with BatchFirst,
// else [L, N, E], or unbatched [L, E]) with no mask.
func (m *MultiheadAttention) Forward(x *autograd.Variable) *autograd.Variable {
	return m.Attend(x, x, x, AttendOptions{})
}

// Attend returns the attention output for query, key and value (torch's
// forward(query, key, value, ..., need_weights=False)[0]): query [N, L, E]
// and key, value [N, S, E] with BatchFirst, [L, N, E] and [S, N, E]
// without, or unbatched [L, E] and [S, E]. The output has the query's shape.
func (m *MultiheadAttention) Attend(query, key, value *autograd.Variable, o AttendOptions) *autograd.Variable {
	e, h := m.EmbedDim, m.NumHeads
	qs := query.Shape()
	unbatched := len(qs) == 2
	if (len(qs) != 2 && len(qs) != 3) || qs[len(qs)-1] != e {
		panic(fmt.Sprintf("nn: MultiheadAttention: query shape %v, want [N, L, %d], [L, N, %d] or [L, %d]", qs, e, e, e))
	}
	// toBatch brings an input to [N, len, E].
	toBatch := func(x *autograd.Variable, what string) *autograd.Variable {
		s := x.Shape()
		if len(s) != len(qs) || s[len(s)-1] != e {
			panic(fmt.Sprintf("nn: MultiheadAttention: %s shape %v does not match query %v", what, s, qs))
		}
		switch {
		case unbatched:
			return autograd.Reshape(x, 1, s[0], e)
		case !m.BatchFirst:
			return autograd.Transpose(x, 0, 1)
		}
		return x
	}
	self := query == key && key == value
	q := toBatch(query, "query")
	n, l := q.Shape()[0], q.Shape()[1]
	var y *autograd.Variable
	if self {
		mask := m.mask(o, n, l, l, unbatched)
		qkv := autograd.LinearWith(q, m.InProjWeight, m.InProjBias, m.OutProj.Precision) // the in-projection runs at the out-projection's precision (amp.Autocast sets both)
		y = autograd.SelfAttention(qkv, h, autograd.AttentionOptions{Mask: mask, Causal: o.Causal, Precision: m.OutProj.Precision})
	} else {
		k, v := toBatch(key, "key"), toBatch(value, "value")
		s := k.Shape()[1]
		if !sameInts(k.Shape(), v.Shape()) || k.Shape()[0] != n {
			panic(fmt.Sprintf("nn: MultiheadAttention: key %v and value %v do not match query %v", key.Shape(), value.Shape(), qs))
		}
		mask := m.mask(o, n, l, s, unbatched)
		heads := func(x *autograd.Variable, part, rows int) *autograd.Variable {
			w := autograd.Narrow(m.InProjWeight, 0, part*e, e)
			var b *autograd.Variable
			if m.InProjBias != nil {
				b = autograd.Narrow(m.InProjBias, 0, part*e, e)
			}
			p := autograd.LinearWith(x, w, b, m.OutProj.Precision)
			return autograd.Transpose(autograd.Reshape(p, n, rows, h, e/h), 1, 2)
		}
		att := autograd.ScaledDotProductAttention(heads(q, 0, l), heads(k, 1, s), heads(v, 2, s),
			autograd.AttentionOptions{Mask: mask, Causal: o.Causal, Precision: m.OutProj.Precision})
		y = autograd.Reshape(autograd.Transpose(att, 1, 2), n, l, e)
	}
	out := m.OutProj.Forward(y)
	switch {
	case unbatched:
		return autograd.Reshape(out, l, e)
	case !m.BatchFirst:
		return autograd.Transpose(out, 0, 1)
	}
	return out
}

// mask merges AttendOptions' masks into one additive mask that broadcasts
// to the scores [N, H, L, S], or returns nil.
func (m *MultiheadAttention) mask(o AttendOptions, n, l, s int, unbatched bool) *tensor.Tensor {
	if o.AttnMask != nil && o.AttnMaskBool != nil {
		panic("nn: MultiheadAttention: give AttnMask or AttnMaskBool, not both")
	}
	var mask *tensor.Tensor
	am := o.AttnMask
	if o.AttnMaskBool != nil {
		am = autograd.BoolMaskToAdditive(o.AttnMaskBool)
	}
	if am != nil {
		as := am.Shape()
		switch {
		case len(as) == 2 && as[0] == l && as[1] == s:
			mask = am
		case len(as) == 3 && as[0] == n*m.NumHeads && as[1] == l && as[2] == s:
			mask = am.Reshape(n, m.NumHeads, l, s)
		default:
			panic(fmt.Sprintf("nn: MultiheadAttention: attn_mask shape %v, want [%d, %d] or [%d, %d, %d]", as, l, s, n*m.NumHeads, l, s))
		}
	}
	if kp := o.KeyPaddingMask; kp != nil {
		want := []int{n, s}
		if unbatched {
			want = []int{s}
		}
		if !sameInts(kp.Shape(), want) {
			panic(fmt.Sprintf("nn: MultiheadAttention: key_padding_mask shape %v, want %v", kp.Shape(), want))
		}
		pad := autograd.BoolMaskToAdditive(kp).Reshape(n, 1, 1, s)
		if mask == nil {
			mask = pad
		} else {
			mask = tensor.Add(mask, pad)
		}
	}
	return mask
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
