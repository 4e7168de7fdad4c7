package tensor

import "fmt"

// Device paths of the transformer ops (examples/gpt): autograd's
// LayerNorm, GELU, Softmax and SelfAttention keep their CPU
// code over host slices and call these first. Each dispatches here, as
// every op does: with its operands on the host it returns ok false (or nil)
// and the caller runs its CPU code; on a device it runs the device's
// Kernels entries on contiguous operands and returns device tensors (an
// entry the device lacks panics with NoKernel).

// attnLayout is the shape of a packed qkv [B, T, 3E] cut into heads: matrix
// bi is batch bi/heads, head bi%heads; aff and the qa..pa methods place
// each operand of its products.
type attnLayout struct{ b, t, e, heads, dh, nb int }

func newAttnLayout(op string, qkv *Tensor, heads int) attnLayout {
	s := qkv.shape
	if len(s) != 3 || heads <= 0 || s[2]%(3*heads) != 0 {
		panic(fmt.Sprintf("tensor: %s: qkv of shape %s with %d heads (want [B, T, 3E] with E divisible by heads)", op, sh(s), heads))
	}
	e := s[2] / 3
	return attnLayout{b: s[0], t: s[1], e: e, heads: heads, dh: e / heads, nb: s[0] * heads}
}

// aff places one operand of the per-head products: matrix (batch b, head
// h) starts at element base + b·batch + h·head of its flat tensor.
type aff struct{ base, batch, head int }

func (a aff) at(l attnLayout, bi int) int { return a.base + (bi/l.heads)*a.batch + (bi%l.heads)*a.head }

// The operands of attention's products: queries, keys and values in the
// packed qkv (row stride 3E), the output (and its gradient) in [B, T, E],
// and the probabilities (and their gradient) in [B·heads, T, T].
func (l attnLayout) qa() aff { return aff{0, l.t * 3 * l.e, l.dh} }
func (l attnLayout) ka() aff { return aff{l.e, l.t * 3 * l.e, l.dh} }
func (l attnLayout) va() aff { return aff{2 * l.e, l.t * 3 * l.e, l.dh} }
func (l attnLayout) oa() aff { return aff{0, l.t * l.e, l.dh} }
func (l attnLayout) pa() aff { return aff{0, l.heads * l.t * l.t, l.t * l.t} }

// gemmHeads runs one product c = alpha·op(a)·op(b) for every (batch, head)
// matrix: one strided-batched GEMM per head over the batch where the device
// has it (attention at batch 32 and 4 heads is then 4 calls, not 128),
// else one GEMM per matrix.
func gemmHeads(k *Kernels, l attnLayout, tA, tB bool, m, n, kk int, alpha float32,
	a *Tensor, ao aff, lda int, b *Tensor, bo aff, ldb int, c *Tensor, co aff, ldc int) {
	if k.GemmStridedBatched != nil {
		for h := range l.heads {
			k.GemmStridedBatched(tA, tB, m, n, kk, alpha, from(a, ao.base+h*ao.head), lda, ao.batch,
				from(b, bo.base+h*bo.head), ldb, bo.batch, 0, from(c, co.base+h*co.head), ldc, co.batch, l.b)
		}
		return
	}
	for bi := range l.nb {
		k.Gemm(tA, tB, m, n, kk, alpha, from(a, ao.at(l, bi)), lda, from(b, bo.at(l, bi)), ldb, 0, from(c, co.at(l, bi)), ldc)
	}
}

// from is the contiguous 1-D view of flat from element off to its end: a
// GEMM operand that starts there, read through its leading dimension.
func from(t *Tensor, off int) *Tensor { return flat(t, off, t.Numel()-off) }

// SelfAttentionDevice is autograd.SelfAttention's forward on qkv's device:
// for every (batch, head) matrix, p = softmax(scale·q kᵀ) (causal: keys
// past the query masked) and y = p v, through one GEMM per product on
// strided views of qkv (no head is copied) and one softmax launch over all
// matrices. It returns y [B, T, E] and p [B·heads, T, T] for the backward;
// nils for qkv on the host. An additive mask has no device path: a non-nil
// mask panics with NoKernel.
func SelfAttentionDevice(qkv, mask *Tensor, heads int, causal bool, scale float64) (y, p *Tensor) {
	const op = "SelfAttention"
	if !onDevice(qkv) {
		return nil, nil
	}
	if mask != nil {
		panic(NoKernel(op+" with an explicit Mask", qkv.Device()))
	}
	k := kernelsFor(op, qkv)
	NeedKernel(k.Gemm != nil && k.AttentionSoftmax != nil, op, qkv.Device())
	l := newAttnLayout(op, qkv, heads)
	x := qkv.Contiguous()
	dev := x.Device()
	y, p = MustZerosOn(dev, l.b, l.t, l.e), MustZerosOn(dev, l.nb, l.t, l.t)
	if l.nb*l.t*l.dh == 0 {
		return y, p
	}
	xf, yf, pf := x.Reshape(-1), y.Reshape(-1), p.Reshape(-1)
	t, ld := l.t, 3*l.e
	gemmHeads(k, l, false, true, t, t, l.dh, float32(scale), xf, l.qa(), ld, xf, l.ka(), ld, pf, l.pa(), t)
	k.AttentionSoftmax(p.Reshape(l.nb*t, t), t, causal)
	gemmHeads(k, l, false, false, t, l.dh, t, 1, pf, l.pa(), t, xf, l.va(), ld, yf, l.oa(), l.e)
	return y, p
}

// SelfAttentionBackwardDevice returns the gradient of qkv [B, T, 3E] from
// the output gradient gy [B, T, E] and SelfAttentionDevice's p (masked
// entries are 0 there, so the causal mask needs no second look); nil for
// operands on the host.
func SelfAttentionBackwardDevice(qkv, p, gy *Tensor, heads int, scale float64) *Tensor {
	const op = "SelfAttention backward"
	if !onDevice(qkv, p, gy) {
		return nil
	}
	k := kernelsFor(op, qkv, p, gy)
	NeedKernel(k.Gemm != nil && k.AttentionSoftmaxBackward != nil, op, qkv.Device())
	l := newAttnLayout(op, qkv, heads)
	x, g := qkv.Contiguous(), gy.Contiguous()
	dev := x.Device()
	gx := MustZerosOn(dev, x.shape...)
	if l.nb*l.t*l.dh == 0 {
		return gx
	}
	dp := MustZerosOn(dev, l.nb, l.t, l.t)
	xf, gf, gxf, pf, dpf := x.Reshape(-1), g.Reshape(-1), gx.Reshape(-1), p.Reshape(-1), dp.Reshape(-1)
	t, ld, e := l.t, 3*l.e, l.e
	// dv = pᵀ g; dp = g vᵀ.
	gemmHeads(k, l, true, false, t, l.dh, t, 1, pf, l.pa(), t, gf, l.oa(), e, gxf, l.va(), ld)
	gemmHeads(k, l, false, true, t, t, l.dh, 1, gf, l.oa(), e, xf, l.va(), ld, dpf, l.pa(), t)
	// ds = p ⊙ (dp - Σ_j dp·p), row by row, in place.
	k.AttentionSoftmaxBackward(dp.Reshape(l.nb*t, t), p.Reshape(l.nb*t, t))
	sc := float32(scale)
	// dq = scale · ds k; dk = scale · dsᵀ q.
	gemmHeads(k, l, false, false, t, l.dh, t, sc, dpf, l.pa(), t, xf, l.ka(), ld, gxf, l.qa(), ld)
	gemmHeads(k, l, true, false, t, l.dh, t, sc, dpf, l.pa(), t, xf, l.qa(), ld, gxf, l.ka(), ld)
	ReleaseScratch(dp)
	return gx
}

// contiguousOrNil is t.Contiguous(), nil for nil.
func contiguousOrNil(t *Tensor) *Tensor {
	if t == nil {
		return nil
	}
	return t.Contiguous()
}
