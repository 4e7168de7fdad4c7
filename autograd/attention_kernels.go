package autograd

import (
	"math"

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
}

// planGemm is the plan's product: bfloat16 operands with float32 accumulation
// (tensor.GemmBF16) for float32 under PrecisionBFloat16, else gemm.
func planGemm[T float](pl *attnPlan, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if af, ok := any(a).([]float32); ok && pl.prec == tensor.PrecisionBFloat16 {
		tensor.GemmBF16(transA, transB, m, n, k, float32(alpha), af, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
		return
	}
	gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// forward computes, for every matrix, p = softmax(scale·q kᵀ + mask) (the
// causal part masked) into p ([nb, L, S]) and o = p v.
func attnForward[T float](pl *attnPlan, q, k, v, p, o []T) {
	l, s := pl.l, pl.s
	var mask []T
	if pl.mask != nil {
		mask = data[T](pl.mask)
	}
	for bi := 0; bi < pl.nb; bi++ {
		pb := p[bi*l*s : (bi+1)*l*s]
		planGemm(pl, false, true, l, s, pl.d, T(pl.scale), q[pl.qOff[bi]:], pl.ldq, k[pl.kOff[bi]:], pl.ldk, 0, pb, s)
		var mb []T
		if mask != nil {
			mb = mask[pl.mOff[bi]*l*s : (pl.mOff[bi]+1)*l*s]
		}
		softmaxRows(pb, mb, l, s, pl.causal)
		planGemm(pl, false, false, l, pl.dv, s, 1, pb, s, v[pl.vOff[bi]:], pl.ldv, 0, o[pl.oOff[bi]:], pl.ldo)
	}
}

// softmaxRows turns each of the l rows of x (l×s scores) into its softmax
// after adding mask (l×s, or nil); with causal, entries j > i are masked
// (zero probability) without being computed. A row whose every entry is
// masked comes out NaN, as in torch.
func softmaxRows[T float](x, mask []T, l, s int, causal bool) {
	if xf, ok := any(x).([]float32); ok {
		mf, _ := any(mask).([]float32)
		tensor.SoftmaxRowsF32(xf, mf, l, s, causal)
		return
	}
	for i := 0; i < l; i++ {
		row := x[i*s : (i+1)*s]
		n := s
		if causal {
			n = min(i+1, s)
			clear(row[n:])
		}
		r := row[:n]
		if mask != nil {
			for j, m := range mask[i*s : i*s+n] {
				r[j] += m
			}
		}
		m := T(math.Inf(-1))
		for _, v := range r {
			m = max(m, v)
		}
		for j := range r {
			r[j] -= m
		}
		expInPlace(r)
		var sum T
		for _, v := range r {
			sum += v
		}
		inv := 1 / sum
		for j := range r {
			r[j] *= inv
		}
	}
}

// expInPlace replaces x by e**x, through the vectorisable float32 kernel for
// float32.
func expInPlace[T float](x []T) {
	if f, ok := any(x).([]float32); ok {
		tensor.ExpF32(f, f)
		return
	}
	for i, v := range x {
		x[i] = T(math.Exp(float64(v)))
	}
}

// attnBackward computes the gradients of q, k and v for every matrix from the
// output gradient gout (laid out as o) and the saved probabilities p; dp is
// L×S scratch. dq, dk and dv (each nil when not wanted) use the layouts of
// q, k and v and are overwritten (beta 0) where the plan places matrices;
// when q, k and v share one buffer (SelfAttention) dq, dk and dv may too.
func attnBackward[T float](pl *attnPlan, q, k, v, p, gout, dp, dq, dk, dv []T) {
	l, s, sc := pl.l, pl.s, T(pl.scale)
	for bi := 0; bi < pl.nb; bi++ {
		pb := p[bi*l*s : (bi+1)*l*s]
		g := gout[pl.oOff[bi]:]
		if dv != nil {
			planGemm(pl, true, false, s, pl.dv, l, 1, pb, s, g, pl.ldo, 0, dv[pl.vOff[bi]:], pl.ldv)
		}
		if dq == nil && dk == nil {
			continue
		}
		planGemm(pl, false, true, l, s, pl.dv, 1, g, pl.ldo, v[pl.vOff[bi]:], pl.ldv, 0, dp, s)
		// ds = p ⊙ (dp - Σ_j dp·p) row by row; masked entries have p = 0.
		softmaxBwdRows(pb, dp, l, s, pl.causal)
		if dq != nil {
			planGemm(pl, false, false, l, pl.d, s, sc, dp, s, k[pl.kOff[bi]:], pl.ldk, 0, dq[pl.qOff[bi]:], pl.ldq)
		}
		if dk != nil {
			planGemm(pl, true, false, s, pl.d, l, sc, dp, s, q[pl.qOff[bi]:], pl.ldq, 0, dk[pl.kOff[bi]:], pl.ldk)
		}
	}
}

// softmaxBwdRows turns dp (l×s, the gradient of the probabilities p) into
// the gradient of the scores in place: dp = p ⊙ (dp - Σ_j dp·p), entries
// past a causal row's end 0.
func softmaxBwdRows[T float](pb, dp []T, l, s int, causal bool) {
	if df, ok := any(dp).([]float32); ok {
		tensor.SoftmaxBwdRowsF32(df, any(pb).([]float32), l, s, causal)
		return
	}
	for i := 0; i < l; i++ {
		n := s
		if causal {
			n = min(i+1, s)
		}
		pr, dr := pb[i*s:i*s+n], dp[i*s:(i+1)*s]
		var dot T
		for j, pv := range pr {
			dot += pv * dr[j]
		}
		for j, pv := range pr {
			dr[j] = pv * (dr[j] - dot)
		}
		clear(dr[n:])
	}
}
