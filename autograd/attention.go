package autograd

import (
	"fmt"
	"math"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// AttentionOptions are the optional arguments of the attention ops.
type AttentionOptions struct {
	// Mask is added to the scaled scores before the softmax, like a float
	// attn_mask in torch: -Inf removes a key for a query. It must broadcast
	// to [batch..., L, S]. A boolean mask (1 = may not attend, torch
	// MultiheadAttention's convention) becomes one through BoolMaskToAdditive.
	// nil means no mask.
	Mask *tensor.Tensor
	// Causal masks key j for query i whenever j > i (the top-left aligned
	// lower triangle, torch's is_causal), without computing those scores.
	Causal bool
	// Scale multiplies q kᵀ; 0 means 1/√D.
	Scale float64
	// Precision is that of the two products of float32 attention and of
	// their gradients: tensor.PrecisionBFloat16 rounds their operands to
	// bfloat16 and accumulates in float32, as torch's autocast runs bmm and
	// matmul; the mask, the softmax and its gradient stay float32. Zero is
	// float32. nn.MultiheadAttention passes its output projection's
	// (amp.Autocast sets it). The ops on a device keep float32 products.
	Precision tensor.Precision
}

// BoolMaskToAdditive turns a 0/1 mask (nonzero: may not attend) into the
// additive float mask the attention ops take: 0 where allowed, -Inf where
// not, as torch's MultiheadAttention converts a bool attn_mask. The result
// has the mask's dtype and device.
func BoolMaskToAdditive(mask *tensor.Tensor) *tensor.Tensor {
	y, _ := tensor.Where(mask, nil, tensor.ZerosAs(mask, mask.Shape()...), math.Inf(-1), 0, mask.Shape())
	return y
}

// ScaledDotProductAttention returns softmax(q kᵀ · scale + mask) v for q
// [..., L, D], k [..., S, D] and v [..., S, Dv] with equal batch dimensions,
// giving [..., L, Dv]: torch 2's F.scaled_dot_product_attention (without
// dropout), and the core of nn.MultiheadAttention. Each (batch, head) matrix
// is two GEMMs with a fused mask + softmax between them (tensor.Attention,
// on the operands' device); the probabilities are kept for backward, which
// is four GEMMs per matrix.
func ScaledDotProductAttention(q, k, v *Variable, o AttentionOptions) *Variable {
	const op = "ScaledDotProductAttention"
	qs, ks, vs := q.Value.Shape(), k.Value.Shape(), v.Value.Shape()
	r := len(qs)
	if r < 2 || len(ks) != r || len(vs) != r || !slices.Equal(qs[:r-2], ks[:r-2]) || !slices.Equal(qs[:r-2], vs[:r-2]) ||
		qs[r-1] != ks[r-1] || ks[r-2] != vs[r-2] {
		panic(fmt.Sprintf("autograd: ScaledDotProductAttention: shapes q %v, k %v, v %v do not fit (want [..., L, D], [..., S, D], [..., S, Dv])", qs, ks, vs))
	}
	sameDType(op, q.Value, k.Value, v.Value)
	batch := qs[:r-2]
	nb := 1
	for _, d := range batch {
		nb *= d
	}
	l, s, d, dv := qs[r-2], ks[r-2], qs[r-1], vs[r-1]
	a := &tensor.AttentionPlan{Op: op, B: nb, Heads: 1, L: l, S: s, D: d, DV: dv,
		Q: tensor.AttentionOperand{Batch: l * d, Ld: d}, K: tensor.AttentionOperand{Batch: s * d, Ld: d},
		V: tensor.AttentionOperand{Batch: s * dv, Ld: dv}, O: tensor.AttentionOperand{Batch: l * dv, Ld: dv},
		Scale: o.Scale, Causal: o.Causal, Precision: o.Precision}
	setMask(op, a, o.Mask, batch, q.Value.DType())
	qc, kc, vc := q.Value.Contiguous(), k.Value.Contiguous(), v.Value.Contiguous()
	y, st := tensor.Attention(qc, kc, vc, a, append(cloneInts(batch), l, dv))
	return FromOp(y, &sdpaOp{inputs: ins(q, k, v), qc: qc, kc: kc, vc: vc, st: st})
}

// setMask broadcasts an additive mask to [maskBatch..., L, S] and records,
// for every matrix of the batch shape, which mask matrix it uses.
func setMask(op string, a *tensor.AttentionPlan, mask *tensor.Tensor, batch []int, dt tensor.DType) {
	if mask == nil {
		return
	}
	ms := mask.Shape()
	if len(ms) > len(batch)+2 {
		panic(fmt.Sprintf("autograd: %s: mask of shape %v has more dimensions than the scores [%v..., %d, %d]", op, ms, batch, a.L, a.S))
	}
	full := append(cloneInts(batch), a.L, a.S)
	if bs := broadcastShapes(op, ms, full); !slices.Equal(bs, full) {
		panic(fmt.Sprintf("autograd: %s: mask of shape %v does not broadcast to the scores %v", op, ms, full))
	}
	mb := []int{}
	if len(ms) > 2 {
		mb = cloneInts(ms[:len(ms)-2])
	}
	a.Mask = broadcastTo(tensor.AsType(mask, dt), append(cloneInts(mb), a.L, a.S))
	a.MOff, _ = batchOffsets(batch, mb, mb)
	if len(a.MOff) == 0 { // no batch dimensions: one matrix
		a.MOff = []int{0}
	}
}

type sdpaOp struct {
	inputs
	qc, kc, vc *tensor.Tensor // contiguous inputs
	st         *tensor.AttentionState
}

func (o *sdpaOp) Name() string { return "ScaledDotProductAttention" }
func (o *sdpaOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the probabilities, what the device's
// entry kept (bf16 operands) and the inputs' contiguous copies.
func (o *sdpaOp) savedTensors() []*tensor.Tensor {
	return append(o.st.Saved(), o.qc, o.kc, o.vc)
}

func (o *sdpaOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	grads := make([]*tensor.Tensor, 3)
	for i, x := range []*tensor.Tensor{o.qc, o.kc, o.vc} {
		if needs(o.in(i)) {
			grads[i] = tensor.EmptyAs(x, x.Shape()...) // every matrix's product covers it whole
		}
	}
	tensor.AttentionBackward(grads[0], grads[1], grads[2], o.st, o.qc, o.kc, o.vc, gy)
	return grads
}
