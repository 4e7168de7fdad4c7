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
// not, as torch's MultiheadAttention converts a bool attn_mask.
func BoolMaskToAdditive(mask *tensor.Tensor) *tensor.Tensor {
	out := tensor.AsType(mask, mask.DType())
	if out.DType() == tensor.Float64 {
		boolToAdditive(out.F64())
	} else {
		boolToAdditive(out.F32())
	}
	return out
}

func boolToAdditive[T float](m []T) {
	for i, v := range m {
		if v != 0 {
			m[i] = T(math.Inf(-1))
		} else {
			m[i] = 0
		}
	}
}

// ScaledDotProductAttention returns softmax(q kᵀ · scale + mask) v for q
// [..., L, D], k [..., S, D] and v [..., S, Dv] with equal batch dimensions,
// giving [..., L, Dv]: torch 2's F.scaled_dot_product_attention (without
// dropout), and the core of nn.MultiheadAttention. Each (batch, head) matrix
// is two GEMMs with a fused mask + softmax between them; the probabilities
// are kept for backward, which is four GEMMs per matrix.
func ScaledDotProductAttention(q, k, v *Variable, o AttentionOptions) *Variable {
	hostOnly("ScaledDotProductAttention", q, k, v)
	qs, ks, vs := q.Value.Shape(), k.Value.Shape(), v.Value.Shape()
	r := len(qs)
	if r < 2 || len(ks) != r || len(vs) != r || !slices.Equal(qs[:r-2], ks[:r-2]) || !slices.Equal(qs[:r-2], vs[:r-2]) ||
		qs[r-1] != ks[r-1] || ks[r-2] != vs[r-2] {
		panic(fmt.Sprintf("autograd: ScaledDotProductAttention: shapes q %v, k %v, v %v do not fit (want [..., L, D], [..., S, D], [..., S, Dv])", qs, ks, vs))
	}
	sameDType("ScaledDotProductAttention", q.Value, k.Value, v.Value)
	batch := qs[:r-2]
	nb := 1
	for _, d := range batch {
		nb *= d
	}
	l, s, d, dv := qs[r-2], ks[r-2], qs[r-1], vs[r-1]
	pl := &attnPlan{nb: nb, l: l, s: s, d: d, dv: dv, causal: o.Causal, ldq: d, ldk: d, ldv: dv, ldo: dv,
		qOff: make([]int, nb), kOff: make([]int, nb), vOff: make([]int, nb), oOff: make([]int, nb)}
	for bi := range nb {
		pl.qOff[bi], pl.kOff[bi], pl.vOff[bi], pl.oOff[bi] = bi*l*d, bi*s*d, bi*s*dv, bi*l*dv
	}
	pl.setScale(o.Scale)
	pl.setPrecision(o.Precision, q.Value.DType())
	pl.setMask("ScaledDotProductAttention", o.Mask, batch, q.Value.DType())
	qc, kc, vc := pl.roundOperand(q.Value.Contiguous()), pl.roundOperand(k.Value.Contiguous()), pl.roundOperand(v.Value.Contiguous())
	y := tensor.New(qc.DType(), append(cloneInts(batch), l, dv)...)
	p := tensor.New(qc.DType(), nb, l, s)
	op := &sdpaOp{inputs: ins(q, k, v), plan: pl, qc: qc, kc: kc, vc: vc, p: p}
	switch {
	case y.DType() == tensor.Float64:
		attnForward(pl, qc.F64(), kc.F64(), vc.F64(), p.F64(), y.F64())
	case pl.packs: // q, k and v rounded once, for the backward's products too
		op.qh, op.kh, op.vh = tensor.RoundToBF16(qc.F32(), nb*l, d), tensor.RoundToBF16(kc.F32(), nb*s, d), tensor.RoundToBF16(vc.F32(), nb*s, dv)
		attnForwardPacked(pl, op.qh.Halves(), op.kh.Halves(), op.vh.Halves(), p.F32(), y.F32())
	default:
		attnForward(pl, qc.F32(), kc.F32(), vc.F32(), p.F32(), y.F32())
	}
	return FromOp(y, op)
}

// setScale sets the score scale: s, or 1/√D when s is 0.
func (pl *attnPlan) setScale(s float64) {
	pl.scale = s
	if s == 0 {
		pl.scale = 1 / math.Sqrt(float64(pl.d))
	}
}

// setMask broadcasts an additive mask to [maskBatch..., L, S] and records,
// for every matrix of the batch shape, which mask matrix it uses.
func (pl *attnPlan) setMask(op string, mask *tensor.Tensor, batch []int, dt tensor.DType) {
	if mask == nil {
		return
	}
	ms := mask.Shape()
	if len(ms) > len(batch)+2 {
		panic(fmt.Sprintf("autograd: %s: mask of shape %v has more dimensions than the scores [%v..., %d, %d]", op, ms, batch, pl.l, pl.s))
	}
	full := append(cloneInts(batch), pl.l, pl.s)
	if bs := broadcastShapes(op, ms, full); !slices.Equal(bs, full) {
		panic(fmt.Sprintf("autograd: %s: mask of shape %v does not broadcast to the scores %v", op, ms, full))
	}
	mb := []int{}
	if len(ms) > 2 {
		mb = cloneInts(ms[:len(ms)-2])
	}
	pl.mask = broadcastTo(tensor.AsType(mask, dt), append(cloneInts(mb), pl.l, pl.s))
	pl.mOff, _ = batchOffsets(batch, mb, mb)
	if len(pl.mOff) == 0 { // no batch dimensions: one matrix
		pl.mOff = []int{0}
	}
}

type sdpaOp struct {
	inputs
	plan       *attnPlan
	qc, kc, vc *tensor.Tensor     // contiguous inputs (rounded to bfloat16 for bf16 products that do not pack)
	p          *tensor.Tensor     // softmax probabilities [nb, L, S]
	qh, kh, vh *tensor.BF16Matrix // the inputs as bfloat16, for a plan that packs
}

func (o *sdpaOp) Name() string { return "ScaledDotProductAttention" }
func (o *sdpaOp) freshGrads()  {}

func (o *sdpaOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = o.plan.roundOperand(gy.Contiguous())
	grads := make([]*tensor.Tensor, 3)
	for i, x := range []*tensor.Tensor{o.qc, o.kc, o.vc} {
		if needs(o.in(i)) {
			grads[i] = tensor.New(x.DType(), x.Shape()...)
		}
	}
	switch {
	case gy.DType() == tensor.Float64:
		sdpaBackward[float64](o, gy, grads)
	case o.plan.packs:
		pl := o.plan
		gh := tensor.RoundToBF16(gy.F32(), pl.nb*pl.l, pl.dv)
		attnBackwardPacked(pl, o.qh.Halves(), o.kh.Halves(), o.vh.Halves(), o.p.F32(), gh.Halves(), make([]float32, pl.l*pl.s),
			grad32(grads[0]), grad32(grads[1]), grad32(grads[2]))
	default:
		sdpaBackward[float32](o, gy, grads)
	}
	return grads
}

// grad32 is t's values, or nil for no tensor.
func grad32(t *tensor.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.F32()
}

func sdpaBackward[T float](o *sdpaOp, gy *tensor.Tensor, grads []*tensor.Tensor) {
	g := func(t *tensor.Tensor) []T {
		if t == nil {
			return nil
		}
		return data[T](t)
	}
	dp := make([]T, o.plan.l*o.plan.s)
	attnBackward(o.plan, data[T](o.qc), data[T](o.kc), data[T](o.vc), data[T](o.p), data[T](gy), dp,
		g(grads[0]), g(grads[1]), g(grads[2]))
}
