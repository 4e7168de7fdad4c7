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
	sh := qkv.Value.Shape()
	if len(sh) != 3 || heads <= 0 || sh[2]%(3*heads) != 0 {
		panic(fmt.Sprintf("autograd: SelfAttention: qkv of shape %v with %d heads (want [B, T, 3E] with E divisible by heads)", sh, heads))
	}
	b, t, e := sh[0], sh[1], sh[2]/3
	dh := e / heads
	nb := b * heads
	pl := &attnPlan{nb: nb, l: t, s: t, d: dh, dv: dh, causal: o.Causal, ldq: 3 * e, ldk: 3 * e, ldv: 3 * e, ldo: e,
		qOff: make([]int, nb), kOff: make([]int, nb), vOff: make([]int, nb), oOff: make([]int, nb)}
	for bi := range nb {
		bb, h := bi/heads, bi%heads
		pl.qOff[bi] = bb*t*3*e + h*dh
		pl.kOff[bi], pl.vOff[bi] = pl.qOff[bi]+e, pl.qOff[bi]+2*e
		pl.oOff[bi] = bb*t*e + h*dh
	}
	pl.setScale(o.Scale)
	if y, p := tensor.SelfAttentionDevice(qkv.Value, o.Mask, heads, pl.causal, pl.scale); y != nil {
		return FromOp(y, &selfAttentionOp{inputs: ins(qkv), plan: pl, x: qkv.Value.Contiguous(), p: p, heads: heads})
	}
	pl.setPrecision(o.Precision, qkv.Value.DType())
	pl.setMask("SelfAttention", o.Mask, []int{b, heads}, qkv.Value.DType())
	x := pl.roundOperand(qkv.Value.Contiguous()) // backward needs only the rounded one
	// Every head's GEMMs write their block of y and p whole (Empty: no
	// zeroing first).
	y := tensor.Empty(x.DType(), b, t, e)
	p := tensor.Empty(x.DType(), nb, t, t)
	var xh *tensor.BF16Matrix
	switch {
	case y.DType() == tensor.Float64:
		xs := x.F64()
		attnForward(pl, xs, xs, xs, p.F64(), y.F64())
	case pl.packs:
		xh = tensor.RoundToBF16(x.F32(), b*t, 3*e) // for the backward's products too
		h := xh.Halves()
		attnForwardPacked(pl, h, h, h, p.F32(), y.F32())
	default:
		xs := x.F32()
		attnForward(pl, xs, xs, xs, p.F32(), y.F32())
	}
	return FromOp(y, &selfAttentionOp{inputs: ins(qkv), plan: pl, x: x, xh: xh, p: p})
}

type selfAttentionOp struct {
	inputs
	plan  *attnPlan
	x     *tensor.Tensor // contiguous qkv
	p     *tensor.Tensor // softmax probabilities [B·heads, T, T]
	gr    *tensor.Tensor // the output gradient rounded to bfloat16 (bf16 products), made by Backward
	heads int            // on a device (0 on the host)
	// A plan that packs: qkv and the output gradient (made by Backward) as bfloat16.
	xh, gh *tensor.BF16Matrix
}

func (o *selfAttentionOp) Name() string { return "SelfAttention" }
func (o *selfAttentionOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the probabilities, the qkv copy and
// the rounded output gradient (engine's savesTensors): without it each
// step's bf16 attention leaves a gradient-sized block to the GC.
func (o *selfAttentionOp) savedTensors() []*tensor.Tensor {
	saved := []*tensor.Tensor{o.x, o.p}
	if o.gr != nil {
		saved = append(saved, o.gr)
	}
	for _, h := range []*tensor.BF16Matrix{o.xh, o.gh} {
		if h != nil {
			saved = append(saved, h.Storage())
		}
	}
	return saved
}

func (o *selfAttentionOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	if gx := tensor.SelfAttentionBackwardDevice(o.x, o.p, gy, o.heads, o.plan.scale); gx != nil {
		return []*tensor.Tensor{gx}
	}
	gy = gy.Contiguous()
	if r := o.plan.roundOperand(gy); r != gy {
		gy, o.gr = r, r
	}
	gx := tensor.Empty(o.x.DType(), o.x.Shape()...) // dq, dk and dv of every head cover it whole
	switch {
	case gy.DType() == tensor.Float64:
		selfAttentionBackward[float64](o, gy, gx)
	case o.plan.packs:
		pl := o.plan
		o.gh = tensor.RoundToBF16(gy.F32(), gy.Numel()/pl.ldo, pl.ldo)
		xh, g := o.xh.Halves(), gx.F32()
		attnBackwardPacked(pl, xh, xh, xh, o.p.F32(), o.gh.Halves(), make([]float32, pl.l*pl.s), g, g, g)
	default:
		selfAttentionBackward[float32](o, gy, gx)
	}
	return []*tensor.Tensor{gx}
}

func selfAttentionBackward[T float](o *selfAttentionOp, gy, gx *tensor.Tensor) {
	x, g := data[T](o.x), data[T](gx)
	dp := make([]T, o.plan.l*o.plan.s)
	attnBackward(o.plan, x, x, x, data[T](o.p), data[T](gy), dp, g, g, g)
}
