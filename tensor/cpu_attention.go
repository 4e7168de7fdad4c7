package tensor

// Attention's entries of the host's table (tensor.Attention): the host
// loops that sat in autograd until 2026-11-29, moved behind the table
// unchanged. Each matrix runs its two products with the softmax between
// them while its operands are in cache; under a causal mask over square
// scores the products are triangular (GemmTri: about half the arithmetic);
// with bf16 products the operands are rounded once (or, where
// GemmTriBF16 runs a causal head's six products on its register kernel,
// packed as bfloat16); the next matrix's operands are prefetched.

// attnPacks reports whether the plan's products pack for operands of type
// dt: bf16 products of causal attention over square scores, where
// GemmTriBF16 runs all six of a head's products on its register kernel at
// about twice the rate of the float32 kernel over rounded operands. q, k,
// v and the output gradient are then rounded once into bfloat16 (half the
// bytes of a rounded float32 copy, and row-major heads need no packing),
// and p and the scores' gradient are rounded by the products as they pack
// them.
func attnPacks(a *AttentionPlan, dt DType) bool {
	l, s, d, dv := a.L, a.S, a.D, a.DV
	return attnBF16(a, dt) && a.Causal && l == s &&
		GemmTriBF16Native(TriCols, l, s, d) && GemmTriBF16Native(TriKEnd, l, dv, s) && // forward
		GemmTriBF16Native(TriKStart, s, dv, l) && GemmTriBF16Native(TriCols, l, s, dv) && // dv, dp
		GemmTriBF16Native(TriKEnd, l, d, s) && GemmTriBF16Native(TriKStart, s, d, l) // dq, dk
}

// attnBF16 reports whether the plan's products take bfloat16 operands:
// float32 under PrecisionBFloat16.
func attnBF16(a *AttentionPlan, dt DType) bool {
	return a.Precision == PrecisionBFloat16 && dt == Float32
}

// cpuPlan is a plan with the host's choices for its precision made.
type cpuPlan struct {
	*AttentionPlan
	nb, ldq, ldk, ldv, ldo int
	scale                  float64
	rounds                 bool // bf16 products over rounded float32 operands (they do not pack)
}

func newCPUPlan(a *AttentionPlan, dt DType) *cpuPlan {
	return &cpuPlan{AttentionPlan: a, nb: a.NB(), ldq: a.Q.Ld, ldk: a.K.Ld, ldv: a.V.Ld, ldo: a.O.Ld,
		scale: a.scale(), rounds: attnBF16(a, dt) && !attnPacks(a, dt)}
}

// qOff, kOff, vOff and oOff are where matrix bi's operands start.
func (pl *cpuPlan) qOff(bi int) int { return pl.Q.at(pl.AttentionPlan, bi) }
func (pl *cpuPlan) kOff(bi int) int { return pl.K.at(pl.AttentionPlan, bi) }
func (pl *cpuPlan) vOff(bi int) int { return pl.V.at(pl.AttentionPlan, bi) }
func (pl *cpuPlan) oOff(bi int) int { return pl.O.at(pl.AttentionPlan, bi) }

// roundedOperands returns q, k and v rounded to bfloat16 values in new
// float32 tensors, one when they are one tensor: the attention rounds each
// operand once and runs float32 GEMMs on the rounded values, the same
// products as bf16 GEMMs without a conversion per (batch, head) product,
// which at a head's size (64×64×32) costs more than bf16 saves.
func roundedOperands(q, k, v *Tensor) [3]*Tensor {
	var out [3]*Tensor
	for i, t := range []*Tensor{q, k, v} {
		for j := range i {
			if []*Tensor{q, k, v}[j] == t {
				out[i] = out[j]
			}
		}
		if out[i] == nil {
			out[i] = roundedCopy(t)
		}
	}
	return out
}

func roundedCopy(t *Tensor) *Tensor {
	r := newFull(Float32, t.shape...) // written whole
	RoundBF16Slice(f32s(r), f32s(t))
	return r
}

// packedOperands is roundedOperands for a plan that packs: q, k and v as
// bfloat16 matrices of rows of ld.
func packedOperands(q, k, v *Tensor, a *AttentionPlan) [3]*BF16Matrix {
	var out [3]*BF16Matrix
	ts, lds := []*Tensor{q, k, v}, []int{a.Q.Ld, a.K.Ld, a.V.Ld}
	for i, t := range ts {
		for j := range i {
			if ts[j] == t && lds[j] == lds[i] {
				out[i] = out[j]
			}
		}
		if out[i] == nil {
			out[i] = RoundToBF16(f32s(t), t.Numel()/lds[i], lds[i])
		}
	}
	return out
}

func cpuAttention(y *Tensor, st *AttentionState, q, k, v *Tensor) {
	a := st.Plan
	pl := newCPUPlan(a, q.dtype)
	st.cpu = pl
	switch {
	case q.dtype == Float64:
		attnForward(pl, f64s(q), f64s(k), f64s(v), f64s(st.P), f64s(y))
	case attnPacks(a, q.dtype): // q, k and v rounded once, for the backward's products too
		st.packed = packedOperands(q, k, v, a)
		attnForwardPacked(pl, st.packed[0].Halves(), st.packed[1].Halves(), st.packed[2].Halves(), f32s(st.P), f32s(y))
	case pl.rounds: // the backward needs only the rounded operands
		st.rounded = roundedOperands(q, k, v)
		attnForward(pl, f32s(st.rounded[0]), f32s(st.rounded[1]), f32s(st.rounded[2]), f32s(st.P), f32s(y))
	default:
		attnForward(pl, f32s(q), f32s(k), f32s(v), f32s(st.P), f32s(y))
	}
}

func cpuAttentionBackward(dq, dk, dv *Tensor, st *AttentionState, q, k, v, gy *Tensor) {
	a, pl := st.Plan, st.cpu
	if pl == nil { // a state of another device's forward
		pl = newCPUPlan(a, gy.dtype)
	}
	switch {
	case gy.dtype == Float64:
		attnBackward(pl, f64s(q), f64s(k), f64s(v), f64s(st.P), f64s(gy), make([]float64, a.L*a.S),
			optHostF64(dq), optHostF64(dk), optHostF64(dv))
	case st.packed[0] != nil:
		gh := RoundToBF16(f32s(gy), gy.Numel()/a.O.Ld, a.O.Ld)
		attnBackwardPacked(pl, st.packed[0].Halves(), st.packed[1].Halves(), st.packed[2].Halves(), f32s(st.P), gh.Halves(),
			make([]float32, a.L*a.S), optHostF32(dq), optHostF32(dk), optHostF32(dv))
		ReleaseScratch(gh.Storage())
	case st.rounded[0] != nil:
		gr := roundedCopy(gy)
		attnBackward(pl, f32s(st.rounded[0]), f32s(st.rounded[1]), f32s(st.rounded[2]), f32s(st.P), f32s(gr),
			make([]float32, a.L*a.S), optHostF32(dq), optHostF32(dk), optHostF32(dv))
		ReleaseScratch(gr)
	default:
		attnBackward(pl, f32s(q), f32s(k), f32s(v), f32s(st.P), f32s(gy), make([]float32, a.L*a.S),
			optHostF32(dq), optHostF32(dk), optHostF32(dv))
	}
}

// roundInPlace rounds x, an L×S matrix of the scores' gradient, to
// bfloat16 values when the plan's products are bf16 (roundMatrix).
func roundInPlace[T float](pl *cpuPlan, x []T) {
	if xf, ok := any(x).([]float32); ok && pl.rounds {
		pl.roundMatrix(xf, xf)
	}
}

// probOperand is p as the second product's operand: p itself, or its
// bfloat16 rounding in scratch (p stays float32 for the softmax backward).
// scratch is zero where a causal p is (roundMatrix leaves it so).
func probOperand[T float](pl *cpuPlan, p, scratch []T) []T {
	if pf, ok := any(p).([]float32); ok && pl.rounds {
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
func (pl *cpuPlan) roundMatrix(dst, src []float32) {
	l, s := pl.L, pl.S
	if !pl.Causal {
		RoundBF16Slice(dst[:l*s], src[:l*s])
		return
	}
	RoundBF16Causal(dst, src, l, s)
}

// maskOf is the plan's additive mask as T, nil for none.
func maskOf[T float](pl *cpuPlan) []T {
	if pl.Mask == nil {
		return nil
	}
	var z T
	if _, ok := any(z).(float32); ok {
		return any(f32s(pl.Mask)).([]T)
	}
	return any(f64s(pl.Mask)).([]T)
}

// attnForward computes, for every matrix, p = softmax(scale·q kᵀ + mask) (the
// causal part masked) into p ([nb, L, S]) and o = p v. With bf16 products
// the caller passes q, k and v rounded (roundedOperands), and p is rounded
// for the second product only, unless the plan packs (the products round
// them).
func attnForward[T float](pl *cpuPlan, q, k, v, p, o []T) {
	l, s := pl.L, pl.S
	mask := maskOf[T](pl)
	var scratch []T
	if pl.rounds {
		scratch = make([]T, l*s)
	}
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNext(pl, bi+1, q, k, v, nil)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		triGemm(pl, TriCols, false, true, l, s, pl.D, T(pl.scale), q[pl.qOff(bi):], pl.ldq, k[pl.kOff(bi):], pl.ldk, pb, s)
		var mb []T
		if mask != nil {
			mb = mask[pl.MOff[bi]*l*s : (pl.MOff[bi]+1)*l*s]
		}
		SoftmaxRows(pb, mb, l, s, pl.Causal)
		triGemm(pl, TriKEnd, false, false, l, pl.DV, s, 1, probOperand(pl, pb, scratch), s, v[pl.vOff(bi):], pl.ldv, o[pl.oOff(bi):], pl.ldo)
	}
}

// attnBackward computes the gradients of q, k and v for every matrix from the
// output gradient gout (laid out as o) and the saved probabilities p; dp is
// L×S scratch. dq, dk and dv (each nil when not wanted) use the layouts of
// q, k and v and are overwritten (beta 0) where the plan places matrices;
// when q, k and v share one buffer (SelfAttention) dq, dk and dv may too.
// With bf16 products q, k, v and gout come rounded, and p and the scores'
// gradient are rounded where they are operands, unless the plan packs.
func attnBackward[T float](pl *cpuPlan, q, k, v, p, gout, dp, dq, dk, dv []T) {
	l, s, sc := pl.L, pl.S, T(pl.scale)
	var scratch []T
	if pl.rounds {
		scratch = make([]T, l*s)
	}
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNext(pl, bi+1, q, k, v, gout)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		g := gout[pl.oOff(bi):]
		if dv != nil {
			triGemm(pl, TriKStart, true, false, s, pl.DV, l, 1, probOperand(pl, pb, scratch), s, g, pl.ldo, dv[pl.vOff(bi):], pl.ldv)
		}
		if dq == nil && dk == nil {
			continue
		}
		triGemm(pl, TriCols, false, true, l, s, pl.DV, 1, g, pl.ldo, v[pl.vOff(bi):], pl.ldv, dp, s)
		// ds = p ⊙ (dp - Σ_j dp·p) row by row; masked entries have p = 0.
		SoftmaxRowsBackward(dp, pb, l, s, pl.Causal)
		roundInPlace(pl, dp) // ds is only an operand from here on
		if dq != nil {
			triGemm(pl, TriKEnd, false, false, l, pl.D, s, sc, dp, s, k[pl.kOff(bi):], pl.ldk, dq[pl.qOff(bi):], pl.ldq)
		}
		if dk != nil {
			triGemm(pl, TriKStart, true, false, s, pl.D, l, sc, dp, s, q[pl.qOff(bi):], pl.ldq, dk[pl.kOff(bi):], pl.ldk)
		}
	}
}

// triGemm runs one of a matrix's products with beta 0. With a causal mask
// over square scores (L = S), float32 products go through GemmTri, which
// skips what the mask makes zero (p and its gradient past the diagonal) or
// unused (the scores and their gradient there, which the causal softmax
// and its backward neither read nor keep): about half the arithmetic. mode
// names which of the three the product is.
func triGemm[T float](pl *cpuPlan, mode TriMode, transA, transB bool, m, n, k int, alpha T, a []T, lda int,
	b []T, ldb int, c []T, ldc int) {
	if af, ok := any(a).([]float32); ok && pl.Causal && pl.L == pl.S {
		GemmTri(mode, transA, transB, m, n, k, float32(alpha), af, lda, any(b).([]float32), ldb, any(c).([]float32), ldc)
		return
	}
	if af, ok := any(a).([]float32); ok {
		Gemm(transA, transB, m, n, k, float32(alpha), af, lda, any(b).([]float32), ldb, 0, any(c).([]float32), ldc)
		return
	}
	Gemm64(transA, transB, m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, 0, any(c).([]float64), ldc)
}

// prefetchNext starts loading matrix bi's operands (q, k, v, and gout when
// not nil) while matrix bi-1's products run: a head's rows are a strided
// slice of a larger buffer, which the hardware prefetchers do not follow,
// and without it the products of a GPT's heads waited on their operands'
// cache misses (in situ 48-86 GFLOPS against 97-150 from cache).
func prefetchNext[T float](pl *cpuPlan, bi int, q, k, v, gout []T) {
	if bi >= pl.nb {
		return
	}
	qf, ok := any(q).([]float32)
	if !ok {
		return
	}
	PrefetchRowsF32(qf[pl.qOff(bi):], pl.L, pl.ldq, pl.D)
	PrefetchRowsF32(any(k).([]float32)[pl.kOff(bi):], pl.S, pl.ldk, pl.D)
	PrefetchRowsF32(any(v).([]float32)[pl.vOff(bi):], pl.S, pl.ldv, pl.DV)
	if gout != nil {
		PrefetchRowsF32(any(gout).([]float32)[pl.oOff(bi):], pl.L, pl.ldo, pl.DV)
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
		PrefetchRowsF32(pf[bi*size:], 1, size, size)
	}
}

// attnForwardPacked is attnForward for a plan that packs (attnPacks): qh,
// kh and vh hold q, k and v as bfloat16, laid out as the plan says.
func attnForwardPacked(pl *cpuPlan, qh, kh, vh []uint16, p, o []float32) {
	l, s := pl.L, pl.S
	mask := maskOf[float32](pl)
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNextBF16(pl, bi+1, qh, kh, vh, nil)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		GemmTriBF16(TriCols, false, true, l, s, pl.D, float32(pl.scale), BF16Operand{H: qh[pl.qOff(bi):]}, pl.ldq,
			BF16Operand{H: kh[pl.kOff(bi):]}, pl.ldk, pb, s)
		var mb []float32
		if mask != nil {
			mb = mask[pl.MOff[bi]*l*s : (pl.MOff[bi]+1)*l*s]
		}
		SoftmaxRows(pb, mb, l, s, pl.Causal)
		GemmTriBF16(TriKEnd, false, false, l, pl.DV, s, 1, BF16Operand{F: pb}, s,
			BF16Operand{H: vh[pl.vOff(bi):]}, pl.ldv, o[pl.oOff(bi):], pl.ldo)
	}
}

// attnBackwardPacked is attnBackward for a plan that packs: qh, kh, vh and
// gh hold q, k, v and the output gradient as bfloat16.
func attnBackwardPacked(pl *cpuPlan, qh, kh, vh []uint16, p []float32, gh []uint16, dp, dq, dk, dv []float32) {
	l, s, sc := pl.L, pl.S, float32(pl.scale)
	for bi := 0; bi < pl.nb; bi++ {
		prefetchNextBF16(pl, bi+1, qh, kh, vh, gh)
		prefetchProbs(p, bi+1, pl.nb, l*s)
		pb := p[bi*l*s : (bi+1)*l*s]
		g := BF16Operand{H: gh[pl.oOff(bi):]}
		if dv != nil {
			GemmTriBF16(TriKStart, true, false, s, pl.DV, l, 1, BF16Operand{F: pb}, s, g, pl.ldo, dv[pl.vOff(bi):], pl.ldv)
		}
		if dq == nil && dk == nil {
			continue
		}
		GemmTriBF16(TriCols, false, true, l, s, pl.DV, 1, g, pl.ldo, BF16Operand{H: vh[pl.vOff(bi):]}, pl.ldv, dp, s)
		SoftmaxRowsBackward(dp, pb, l, s, pl.Causal)
		ds := BF16Operand{F: dp}
		if dq != nil {
			GemmTriBF16(TriKEnd, false, false, l, pl.D, s, sc, ds, s, BF16Operand{H: kh[pl.kOff(bi):]}, pl.ldk, dq[pl.qOff(bi):], pl.ldq)
		}
		if dk != nil {
			GemmTriBF16(TriKStart, true, false, s, pl.D, l, sc, ds, s, BF16Operand{H: qh[pl.qOff(bi):]}, pl.ldq, dk[pl.kOff(bi):], pl.ldk)
		}
	}
}

// prefetchNextBF16 is prefetchNext for bfloat16 operands.
func prefetchNextBF16(pl *cpuPlan, bi int, qh, kh, vh, gh []uint16) {
	if bi >= pl.nb {
		return
	}
	PrefetchRowsBF16(qh[pl.qOff(bi):], pl.L, pl.ldq, pl.D)
	PrefetchRowsBF16(kh[pl.kOff(bi):], pl.S, pl.ldk, pl.D)
	PrefetchRowsBF16(vh[pl.vOff(bi):], pl.S, pl.ldv, pl.DV)
	if gh != nil {
		PrefetchRowsBF16(gh[pl.oOff(bi):], pl.L, pl.ldo, pl.DV)
	}
}
