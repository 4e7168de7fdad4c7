package tensor

import (
	"fmt"
	"math"
)

// Scaled dot-product attention on every device (autograd's
// ScaledDotProductAttention and SelfAttention). A device whose table has
// the Attention entries (the CPU's: per matrix, triangular products under a
// causal mask, bfloat16 packing, prefetching, cpu_attention.go) runs them;
// any other runs the plan as GEMMs (GemmStridedBatched per head where it
// has it) and one AttentionSoftmax launch over every matrix.

// AttentionOperand places one operand of attention's per-matrix products
// in its flat tensor: matrix bi (batch bi/Heads, head bi%Heads) starts at
// element Base + (bi/Heads)·Batch + (bi%Heads)·Head, its rows Ld elements
// apart. A head of a packed [B, T, 3E] projection is read in place this
// way, with no copy.
type AttentionOperand struct{ Base, Batch, Head, Ld int }

func (o AttentionOperand) at(a *AttentionPlan, bi int) int {
	return o.Base + (bi/a.Heads)*o.Batch + (bi%a.Heads)*o.Head
}

// AttentionPlan describes a batch of B·Heads attention problems laid out
// in memory: for matrix bi, p = softmax(Scale·q kᵀ + mask) with q L rows
// of D, k S rows of D, and o = p v with v S rows of DV and o L rows of DV,
// each placed by its operand (O places the output and its gradient; the
// gradients of q, k and v use the places of their values).
type AttentionPlan struct {
	Op          string // the op's name in panics ("SelfAttention"); "" reads "Attention"
	B, Heads    int
	L, S, D, DV int
	Q, K, V, O  AttentionOperand
	Scale       float64 // 0: 1/√D
	Causal      bool    // key j masked for query i when j > i (torch's is_causal)
	Mask        *Tensor // additive, [mb, L, S] contiguous in the operands' dtype, or nil
	MOff        []int   // for every matrix, the index of its mask matrix
	Precision   Precision
}

func (a *AttentionPlan) name() string {
	if a.Op == "" {
		return "Attention"
	}
	return a.Op
}

// NB is the number of matrices, B·Heads.
func (a *AttentionPlan) NB() int { return a.B * a.Heads }

// scale is the scores' scale: Scale, or 1/√D when it is 0.
func (a *AttentionPlan) scale() float64 {
	if a.Scale != 0 {
		return a.Scale
	}
	return 1 / math.Sqrt(float64(a.D))
}

// AttentionState is what attention's forward keeps for its backward: the
// plan, the probabilities P [NB, L, S] (masked entries 0), and what the
// device's entry keeps besides (the CPU: its operands rounded to bfloat16
// under bf16 products).
type AttentionState struct {
	Plan *AttentionPlan
	P    *Tensor
	// The CPU entry's: q, k and v rounded to bfloat16 values in float32
	// tensors (bf16 products that do not pack), or as bfloat16 matrices (a
	// plan that packs); entries alias when q, k and v are one tensor.
	rounded [3]*Tensor
	packed  [3]*BF16Matrix
	cpu     *cpuPlan // the matrices' offsets, resolved by the forward
}

// Saved lists the tensors the state holds, for a Recycler (FreeGraph):
// after they are recycled the state must not be used.
func (st *AttentionState) Saved() []*Tensor {
	out := []*Tensor{st.P}
	for i := range 3 {
		if st.rounded[i] != nil && (i == 0 || st.rounded[i] != st.rounded[i-1]) {
			out = append(out, st.rounded[i])
		}
		if st.packed[i] != nil && (i == 0 || st.packed[i] != st.packed[i-1]) {
			out = append(out, st.packed[i].Storage())
		}
	}
	return out
}

// Attention runs the plan's forward over q, k and v (contiguous flat
// tensors, which may be one tensor: SelfAttention's packed projection) on
// their device and returns y (of oshape, placed by a.O) and the state for
// AttentionBackward. With bf16 products (a.Precision) the CPU rounds the
// products' operands to bfloat16, as torch's autocast bmm; devices keep
// float32 products. An additive mask has no device path yet (NoKernel).
func Attention(q, k, v *Tensor, a *AttentionPlan, oshape []int) (*Tensor, *AttentionState) {
	op := a.name()
	kt := table(op, q, k, v)
	if q.dtype != k.dtype || q.dtype != v.dtype {
		panic(fmt.Sprintf("tensor: %s: dtypes %v, %v and %v", op, q.dtype, k.dtype, v.dtype))
	}
	if a.Mask != nil {
		if kt.Attention == nil {
			panic(NoKernel(op+" with an explicit Mask", q.Device()))
		}
		kernelsFor(op, q, a.Mask) // a mask on another device panics, naming both
	}
	nb := a.NB()
	// The products write y and p whole (beta 0), masked entries included.
	st := &AttentionState{Plan: a, P: EmptyAs(q, nb, a.L, a.S)}
	y := EmptyAs(q, oshape...)
	if nb*a.L == 0 {
		return y, st
	}
	if kt.Attention != nil {
		kt.Attention(y, st, q.Contiguous(), k.Contiguous(), v.Contiguous())
		return y, st
	}
	NeedKernel(kt.Gemm != nil && kt.AttentionSoftmax != nil, op, q.Device())
	qf, kf, vf := flatOf(q), flatOf(k), flatOf(v)
	pf, yf := flatOf(st.P), flatOf(y)
	pa := AttentionOperand{Batch: a.Heads * a.L * a.S, Head: a.L * a.S, Ld: a.S}
	attnGemms(kt, a, false, true, a.L, a.S, a.D, float32(a.scale()), qf, a.Q, kf, a.K, pf, pa)
	kt.AttentionSoftmax(st.P.Reshape(nb*a.L, a.S), a.L, a.Causal)
	attnGemms(kt, a, false, false, a.L, a.DV, a.S, 1, pf, pa, vf, a.V, yf, a.O)
	return y, st
}

// AttentionBackward writes the gradients of q, k and v (each nil when not
// wanted; they may be one tensor, as the values) from the output gradient
// gy and the forward's state, overwriting where the plan places matrices.
func AttentionBackward(dq, dk, dv *Tensor, st *AttentionState, q, k, v, gy *Tensor) {
	a := st.Plan
	op := a.name() + " backward"
	kt := table(op, q, k, v, gy, dq, dk, dv)
	nb := a.NB()
	if nb*a.L*a.S == 0 {
		for _, g := range []*Tensor{dq, dk, dv} {
			if g != nil {
				Fill(g, 0)
			}
		}
		return
	}
	g := gy.Contiguous()
	if kt.AttentionBackward != nil {
		kt.AttentionBackward(dq, dk, dv, st, q.Contiguous(), k.Contiguous(), v.Contiguous(), g)
		return
	}
	NeedKernel(kt.Gemm != nil && kt.AttentionSoftmaxBackward != nil, op, q.Device())
	qf, kf, vf, gf, pf := flatOf(q), flatOf(k), flatOf(v), flatOf(g), flatOf(st.P)
	pa := AttentionOperand{Batch: a.Heads * a.L * a.S, Head: a.L * a.S, Ld: a.S}
	if dv != nil { // dv = pᵀ g
		attnGemms(kt, a, true, false, a.S, a.DV, a.L, 1, pf, pa, gf, a.O, flatOf(dv), a.V)
	}
	if dq == nil && dk == nil {
		return
	}
	dp := EmptyAs(g, nb, a.L, a.S) // dp = g vᵀ, written whole
	dpf := flatOf(dp)
	attnGemms(kt, a, false, true, a.L, a.S, a.DV, 1, gf, a.O, vf, a.V, dpf, pa)
	// ds = p ⊙ (dp - Σ_j dp·p), row by row, in place; masked entries have p = 0.
	kt.AttentionSoftmaxBackward(dp.Reshape(nb*a.L, a.S), st.P.Reshape(nb*a.L, a.S))
	sc := float32(a.scale())
	if dq != nil { // dq = scale · ds k
		attnGemms(kt, a, false, false, a.L, a.D, a.S, sc, dpf, pa, kf, a.K, flatOf(dq), a.Q)
	}
	if dk != nil { // dk = scale · dsᵀ q
		attnGemms(kt, a, true, false, a.S, a.D, a.L, sc, dpf, pa, qf, a.Q, flatOf(dk), a.K)
	}
	ReleaseScratch(dp)
}

// attnGemms runs one product c = alpha·op(a)·op(b) (beta 0) for every
// matrix of the plan: one strided-batched GEMM per head over the batch
// where the device has it (attention at batch 32 and 4 heads is then 4
// calls, not 128), else one GEMM per matrix.
func attnGemms(k *Kernels, a *AttentionPlan, tA, tB bool, m, n, kk int, alpha float32,
	x *Tensor, xo AttentionOperand, y *Tensor, yo AttentionOperand, c *Tensor, co AttentionOperand) {
	if k.GemmStridedBatched != nil {
		for h := range a.Heads {
			k.GemmStridedBatched(tA, tB, m, n, kk, alpha, from(x, xo.Base+h*xo.Head), xo.Ld, xo.Batch,
				from(y, yo.Base+h*yo.Head), yo.Ld, yo.Batch, 0, from(c, co.Base+h*co.Head), co.Ld, co.Batch, a.B)
		}
		return
	}
	for bi := range a.NB() {
		k.Gemm(tA, tB, m, n, kk, alpha, from(x, xo.at(a, bi)), xo.Ld, from(y, yo.at(a, bi)), yo.Ld, 0, from(c, co.at(a, bi)), co.Ld)
	}
}

// flatOf is t's elements as a contiguous 1-D tensor.
func flatOf(t *Tensor) *Tensor { return t.Contiguous().Reshape(-1) }

// from is the contiguous 1-D view of flat from element off to its end: a
// GEMM operand that starts there, read through its leading dimension.
func from(t *Tensor, off int) *Tensor { return flat(t, off, t.Numel()-off) }
