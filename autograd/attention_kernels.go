package autograd

import (
	"github.com/goddp/goddp/tensor"
)

// attnPlan describes a batch of attention problems laid out in memory: for
// matrix bi, query rows start at q[qOff[bi]] with row stride ldq (L rows of
// D), keys at k[kOff[bi]] (S rows of D), values at v[vOff[bi]] (S rows of
// Dv) and output rows at o[oOff[bi]] (L rows of Dv). Gradients use the
// layouts of their values. ScaledDotProductAttention lays contiguous
// [..., L, D] tensors out this way, SelfAttention the heads of a packed
// [B, T, 3E] projection, so neither copies a head into place.
type attnPlan struct {
	nb, l, s, d, dv    int
	scale              float64
	causal             bool
	qOff, kOff, vOff   []int
	oOff               []int
	ldq, ldk, ldv, ldo int
	mask               *tensor.Tensor // additive, [mb, L, S] contiguous, or nil
	mOff               []int          // matrix index into mask for each bi
	prec               tensor.Precision
	packs              bool // bf16 products that round their own operands (setPrecision)
}

// setPrecision sets the plan's precision for operands of type dt. With
// bf16 products of causal attention over square scores, where
// tensor.GemmTriBF16 runs all six of a head's products on its register
// kernel, the plan packs: the products multiply bfloat16 pairs, at about
// twice the rate of the float32 kernel over rounded operands. q, k, v and
// the output gradient are then rounded once into bfloat16 (half the bytes
// of a rounded float32 copy, and row-major heads need no packing), and p
// and the scores' gradient are rounded by the products as they pack them
// (attnForwardPacked, attnBackwardPacked).
func (pl *attnPlan) setPrecision(prec tensor.Precision, dt tensor.DType) {
	pl.prec = prec
	l, s, d, dv := pl.l, pl.s, pl.d, pl.dv
	pl.packs = pl.bf16(dt) && pl.causal && l == s &&
		tensor.GemmTriBF16Native(tensor.TriCols, l, s, d) && tensor.GemmTriBF16Native(tensor.TriKEnd, l, dv, s) && // forward
		tensor.GemmTriBF16Native(tensor.TriKStart, s, dv, l) && tensor.GemmTriBF16Native(tensor.TriCols, l, s, dv) && // dv, dp
		tensor.GemmTriBF16Native(tensor.TriKEnd, l, d, s) && tensor.GemmTriBF16Native(tensor.TriKStart, s, d, l) // dq, dk
}

// rounds reports whether the plan rounds bf16 operands itself (its
// products are bf16 and do not pack).
func (pl *attnPlan) rounds() bool {
	return pl.prec == tensor.PrecisionBFloat16 && !pl.packs
}

// bf16 reports whether the plan's products take bfloat16 operands: float32
// under PrecisionBFloat16.
func (pl *attnPlan) bf16(dt tensor.DType) bool {
	return pl.prec == tensor.PrecisionBFloat16 && dt == tensor.Float32
}

// roundOperand returns t's elements rounded to bfloat16 in a new tensor
// when the plan's products are bf16, else t. The attention rounds each
// operand once (q, k and v, the output gradient) and runs float32 GEMMs on
// the rounded values: the same products as bf16 GEMMs, without a
// conversion per (batch, head) product, which at a head's size (64×64×32)
// costs more than bf16 saves.
func (pl *attnPlan) roundOperand(t *tensor.Tensor) *tensor.Tensor {
	if !pl.bf16(t.DType()) || pl.packs {
		return t
	}
	r := tensor.Empty(tensor.Float32, t.Shape()...)
	tensor.RoundBF16Slice(r.F32(), t.F32())
	return r
}

// roundInPlace rounds x, an L×S matrix of the scores' gradient, to
// bfloat16 values when the plan's products are bf16 (roundMatrix).
func roundInPlace[T float](pl *attnPlan, x []T) {
	if xf, ok := any(x).([]float32); ok && pl.rounds() {
		pl.roundMatrix(xf, xf)
	}
}

// probOperand is p as the second product's operand: p itself, or its
// bfloat16 rounding in scratch (p stays float32 for the softmax backward).
// scratch is zero where a causal p is (roundMatrix leaves it so).
func probOperand[T float](pl *attnPlan, p, scratch []T) []T {
	if pf, ok := any(p).([]float32); ok && pl.rounds() {
		pl.roundMatrix(any(scratch).([]float32), pf)
		return scratch
	}
	return p
}

// roundMatrix writes the L×S matrix src rounded to bfloat16 to dst. With a
// causal mask only each row's first i+1 entries: the causal softmax and its
// backward write zeros past them, so they round to themselves, and dst
// holds zeros there already (it is src, or scratch that was made zero and
// is never written there).
func (pl *attnPlan) roundMatrix(dst, src []float32) {
	l, s := pl.l, pl.s
	if !pl.causal {
		tensor.RoundBF16Slice(dst[:l*s], src[:l*s])
		return
	}
	tensor.RoundBF16Causal(dst, src, l, s)
}

// attnForward computes, for every matrix, p = softmax(scale·q kᵀ + mask) (the
// causal part masked) into p ([nb, L, S]) and o = p v. With bf16 products
// the caller passes q, k and v rounded (roundOperand), and p is rounded
// for the second product only, unless the plan packs (the products round
// them).
func attnForward[T float](pl *attnPlan, q, k, v, p, o []T) {
	l, s := pl.l, pl.s
	var mask []T
	if pl.mask != nil {
		mask = data[T](pl.mask)
	}
	var scratch []T
	if pl.rounds() {
		scratch = make([]T, l*s)
	}
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNext(pl, bi+1, q, k, v, nil)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		triGemm(pl, tensor.TriCols, false, true, l, s, pl.d, T(pl.scale), q[pl.qOff[bi]:], pl.ldq, k[pl.kOff[bi]:], pl.ldk, pb, s)
		var mb []T
		if mask != nil {
			mb = mask[pl.mOff[bi]*l*s : (pl.mOff[bi]+1)*l*s]
		}
		tensor.SoftmaxRows(pb, mb, l, s, pl.causal)
		triGemm(pl, tensor.TriKEnd, false, false, l, pl.dv, s, 1, probOperand(pl, pb, scratch), s, v[pl.vOff[bi]:], pl.ldv, o[pl.oOff[bi]:], pl.ldo)
	}
}

// attnBackward computes the gradients of q, k and v for every matrix from the
// output gradient gout (laid out as o) and the saved probabilities p; dp is
// L×S scratch. dq, dk and dv (each nil when not wanted) use the layouts of
// q, k and v and are overwritten (beta 0) where the plan places matrices;
// when q, k and v share one buffer (SelfAttention) dq, dk and dv may too.
// With bf16 products q, k, v and gout come rounded (roundOperand), and p
// and the scores' gradient are rounded where they are operands, unless the
// plan packs.
func attnBackward[T float](pl *attnPlan, q, k, v, p, gout, dp, dq, dk, dv []T) {
	l, s, sc := pl.l, pl.s, T(pl.scale)
	var scratch []T
	if pl.rounds() {
		scratch = make([]T, l*s)
	}
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNext(pl, bi+1, q, k, v, gout)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		g := gout[pl.oOff[bi]:]
		if dv != nil {
			triGemm(pl, tensor.TriKStart, true, false, s, pl.dv, l, 1, probOperand(pl, pb, scratch), s, g, pl.ldo, dv[pl.vOff[bi]:], pl.ldv)
		}
		if dq == nil && dk == nil {
			continue
		}
		triGemm(pl, tensor.TriCols, false, true, l, s, pl.dv, 1, g, pl.ldo, v[pl.vOff[bi]:], pl.ldv, dp, s)
		// ds = p ⊙ (dp - Σ_j dp·p) row by row; masked entries have p = 0.
		tensor.SoftmaxRowsBackward(dp, pb, l, s, pl.causal)
		roundInPlace(pl, dp) // ds is only an operand from here on
		if dq != nil {
			triGemm(pl, tensor.TriKEnd, false, false, l, pl.d, s, sc, dp, s, k[pl.kOff[bi]:], pl.ldk, dq[pl.qOff[bi]:], pl.ldq)
		}
		if dk != nil {
			triGemm(pl, tensor.TriKStart, true, false, s, pl.d, l, sc, dp, s, q[pl.qOff[bi]:], pl.ldq, dk[pl.kOff[bi]:], pl.ldk)
		}
	}
}

// triGemm runs one of a matrix's products with beta 0. With a causal mask
// over square scores (L = S), float32 products go through tensor.GemmTri,
// which skips what the mask makes zero (p and its gradient past the
// diagonal) or unused (the scores and their gradient there, which the
// causal softmax and its backward neither read nor keep): about half the
// arithmetic. mode names which of the three the product is.
func triGemm[T float](pl *attnPlan, mode tensor.TriMode, transA, transB bool, m, n, k int, alpha T, a []T, lda int,
	b []T, ldb int, c []T, ldc int) {
	if af, ok := any(a).([]float32); ok && pl.causal && pl.l == pl.s {
		tensor.GemmTri(mode, transA, transB, m, n, k, float32(alpha), af, lda, any(b).([]float32), ldb, any(c).([]float32), ldc)
		return
	}
	gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
}

// prefetchNext starts loading matrix bi's operands (q, k, v, and gout when
// not nil) while matrix bi-1's products run: a head's rows are a strided
// slice of a larger buffer, which the hardware prefetchers do not follow,
// and without it the products of a GPT's heads waited on their operands'
// cache misses (in situ 48-86 GFLOPS against 97-150 from cache).
func prefetchNext[T float](pl *attnPlan, bi int, q, k, v, gout []T) {
	if bi >= pl.nb {
		return
	}
	qf, ok := any(q).([]float32)
	if !ok {
		return
	}
	tensor.PrefetchRowsF32(qf[pl.qOff[bi]:], pl.l, pl.ldq, pl.d)
	tensor.PrefetchRowsF32(any(k).([]float32)[pl.kOff[bi]:], pl.s, pl.ldk, pl.d)
	tensor.PrefetchRowsF32(any(v).([]float32)[pl.vOff[bi]:], pl.s, pl.ldv, pl.dv)
	if gout != nil {
		tensor.PrefetchRowsF32(any(gout).([]float32)[pl.oOff[bi]:], pl.l, pl.ldo, pl.dv)
	}
}

// prefetchProbs starts loading matrix bi's block of the probabilities p
// (size elements each): the forward writes it, the backward reads it
// transposed (dv = pᵀ·gout). A GPT's p is megabytes a layer, out of
// cache by the time either reaches a head, and the products waited on it:
// in situ the backward's Aᵀ products ran at 49 GFLOPS without it and 70
// with it (-kernel-profile, one epoch, the same phase of the host).
func prefetchProbs[T float](p []T, bi, nb, size int) {
	if pf, ok := any(p).([]float32); ok && bi < nb {
		tensor.PrefetchRowsF32(pf[bi*size:], 1, size, size)
	}
}

// attnForwardPacked is attnForward for a plan that packs (setPrecision):
// qh, kh and vh hold q, k and v as bfloat16, laid out as the plan says.
func attnForwardPacked(pl *attnPlan, qh, kh, vh []uint16, p, o []float32) {
	l, s := pl.l, pl.s
	var mask []float32
	if pl.mask != nil {
		mask = pl.mask.F32()
	}
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNextBF16(pl, bi+1, qh, kh, vh, nil)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		tensor.GemmTriBF16(tensor.TriCols, false, true, l, s, pl.d, float32(pl.scale), tensor.BF16Operand{H: qh[pl.qOff[bi]:]}, pl.ldq,
			tensor.BF16Operand{H: kh[pl.kOff[bi]:]}, pl.ldk, pb, s)
		var mb []float32
		if mask != nil {
			mb = mask[pl.mOff[bi]*l*s : (pl.mOff[bi]+1)*l*s]
		}
		tensor.SoftmaxRows(pb, mb, l, s, pl.causal)
		tensor.GemmTriBF16(tensor.TriKEnd, false, false, l, pl.dv, s, 1, tensor.BF16Operand{F: pb}, s,
			tensor.BF16Operand{H: vh[pl.vOff[bi]:]}, pl.ldv, o[pl.oOff[bi]:], pl.ldo)
	}
}

// attnBackwardPacked is attnBackward for a plan that packs: qh, kh, vh and
// gh hold q, k, v and the output gradient as bfloat16.
func attnBackwardPacked(pl *attnPlan, qh, kh, vh []uint16, p []float32, gh []uint16, dp, dq, dk, dv []float32) {
	l, s, sc := pl.l, pl.s, float32(pl.scale)
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNextBF16(pl, bi+1, qh, kh, vh, gh)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		g := tensor.BF16Operand{H: gh[pl.oOff[bi]:]}
		if dv != nil {
			tensor.GemmTriBF16(tensor.TriKStart, true, false, s, pl.dv, l, 1, tensor.BF16Operand{F: pb}, s, g, pl.ldo, dv[pl.vOff[bi]:], pl.ldv)
		}
		if dq == nil && dk == nil {
			continue
		}
		tensor.GemmTriBF16(tensor.TriCols, false, true, l, s, pl.dv, 1, g, pl.ldo, tensor.BF16Operand{H: vh[pl.vOff[bi]:]}, pl.ldv, dp, s)
		tensor.SoftmaxRowsBackward(dp, pb, l, s, pl.causal)
		ds := tensor.BF16Operand{F: dp}
		if dq != nil {
			tensor.GemmTriBF16(tensor.TriKEnd, false, false, l, pl.d, s, sc, ds, s, tensor.BF16Operand{H: kh[pl.kOff[bi]:]}, pl.ldk, dq[pl.qOff[bi]:], pl.ldq)
		}
		if dk != nil {
			tensor.GemmTriBF16(tensor.TriKStart, true, false, s, pl.d, l, sc, ds, s, tensor.BF16Operand{H: qh[pl.qOff[bi]:]}, pl.ldq, dk[pl.kOff[bi]:], pl.ldk)
		}
	}
}

// prefetchNextBF16 is prefetchNext for bfloat16 operands.
func prefetchNextBF16(pl *attnPlan, bi int, qh, kh, vh, gh []uint16) {
	if bi >= pl.nb {
		return
	}
	tensor.PrefetchRowsBF16(qh[pl.qOff[bi]:], pl.l, pl.ldq, pl.d)
	tensor.PrefetchRowsBF16(kh[pl.kOff[bi]:], pl.s, pl.ldk, pl.d)
	tensor.PrefetchRowsBF16(vh[pl.vOff[bi]:], pl.s, pl.ldv, pl.dv)
	if gh != nil {
		tensor.PrefetchRowsBF16(gh[pl.oOff[bi]:], pl.l, pl.ldo, pl.dv)
	}
}
