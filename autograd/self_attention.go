package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// SelfAttention is multi-head scaled dot-product self-attention over a packed
// projection: qkv is [B, T, 3E] holding, along its last dimension, the
// queries, keys and values of all heads (what x @ in_proj_weightᵀ gives in
// torch's MultiheadAttention, or the qkv Linear of a GPT block), each cut into
// heads of E/heads features. The result is [B, T, E] with the heads side by
// side, ready for the output projection. It equals
//
//	q, k, v = qkv.split(E, dim=2)
//	q, k, v = [t.view(B, T, heads, E//heads).transpose(1, 2) for t in (q, k, v)]
//	y = softmax(q @ kᵀ · scale + mask) @ v
//	y.transpose(1, 2).reshape(B, T, E)
//
// but reads every head in place through the GEMMs' leading dimensions and
// writes its gradient straight into one [B, T, 3E] buffer: no split, permute
// or concatenation copies in either direction. o.Mask broadcasts to
// [B, heads, T, T].
func SelfAttention(qkv *Variable, heads int, o AttentionOptions) *Variable {
	const op = "SelfAttention"
	sh := qkv.Value.Shape()
	if len(sh) != 3 || heads <= 0 || sh[2]%(3*heads) != 0 {
		panic(fmt.Sprintf("autograd: SelfAttention: qkv of shape %v with %d heads (want [B, T, 3E] with E divisible by heads)", sh, heads))
	}
	b, t, e := sh[0], sh[1], sh[2]/3
	dh := e / heads
	// Head h of batch bb reads its queries, keys and values in place in
	// the [B, T, 3E] projection (row stride 3E) and writes its output into
	// [B, T, E] (row stride E).
	a := &tensor.AttentionPlan{Op: op, B: b, Heads: heads, L: t, S: t, D: dh, DV: dh,
		Q:     tensor.AttentionOperand{Base: 0, Batch: t * 3 * e, Head: dh, Ld: 3 * e},
		K:     tensor.AttentionOperand{Base: e, Batch: t * 3 * e, Head: dh, Ld: 3 * e},
		V:     tensor.AttentionOperand{Base: 2 * e, Batch: t * 3 * e, Head: dh, Ld: 3 * e},
		O:     tensor.AttentionOperand{Batch: t * e, Head: dh, Ld: e},
		Scale: o.Scale, Causal: o.Causal, Precision: o.Precision}
	setMask(op, a, o.Mask, []int{b, heads}, qkv.Value.DType())
	x := qkv.Value.Contiguous()
	y, st := tensor.Attention(x, x, x, a, []int{b, t, e})
	return FromOp(y, &selfAttentionOp{inputs: ins(qkv), x: x, st: st})
}

type selfAttentionOp struct {
	inputs
	x  *tensor.Tensor // contiguous qkv
	st *tensor.AttentionState
}

func (o *selfAttentionOp) Name() string { return "SelfAttention" }
func (o *selfAttentionOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the probabilities, what the device's
// entry kept (qkv as bfloat16 under bf16 products) and qkv's contiguous
// copy (engine's savesTensors): without it each step's attention leaves
// blocks of [B·heads, T, T] to the GC.
func (o *selfAttentionOp) savedTensors() []*tensor.Tensor {
	return append(o.st.Saved(), o.x)
}

func (o *selfAttentionOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gx := tensor.EmptyAs(o.x, o.x.Shape()...) // dq, dk and dv of every head cover it whole
	tensor.AttentionBackward(gx, gx, gx, o.st, o.x, o.x, o.x, gy)
	return []*tensor.Tensor{gx}
}
