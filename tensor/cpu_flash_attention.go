package tensor

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// FlashAttention returns the scaled dot-product attention of the packed
// projection qkv, laid out [B, T, 3, H, D] (GPT-2's c_attn output
// [B, T, 3·H·D]: queries, keys and values, each with its H heads side by
// side): y [B, T, H·D], the heads side by side, and lse [B, H, T], each
// query row's log Σ_j exp(scale·q·k_j) over the keys it sees, which is
// all the backward keeps of the softmax. With causal query i sees keys
// 0..i; with bf16 (float32 operands only) the products' operands are
// rounded to bfloat16, as under autocast (Kernels.FlashAttention). It
// runs the FlashAttention entry of qkv's device, the host's included, and
// allocates y and lse there; on the host y and lse have qkv's dtype
// (float64 serves the gradient checks).
func FlashAttention(qkv *Tensor, b, t, h, d int, scale float32, causal, bf16 bool) (y, lse *Tensor) {
	const name = "FlashAttention"
	checkFlash(name, qkv, "qkv", b*t*3*h*d, b, t, h, d)
	k := table(name, qkv)
	need(k.FlashAttention != nil, name, qkv)
	qkv = qkv.Contiguous()
	y = EmptyAs(qkv, b, t, h*d) // every row of every head is written
	lse = EmptyAs(qkv, b, h, t)
	k.FlashAttention(y, lse, qkv, b, t, h, d, scale, causal, bf16 && qkv.dtype == Float32)
	return y, lse
}

// FlashAttentionBackward returns the gradient of FlashAttention's qkv,
// shaped as qkv, from the output gradient dy [B, T, H·D] and what the
// forward kept (qkv, y and lse), by the FlashAttentionBackward entry of
// their device: FlashAttention-2's backward, which recomputes each tile's
// probabilities from lse rather than reading a stored [T, T] matrix.
func FlashAttentionBackward(dy, qkv, y, lse *Tensor, b, t, h, d int, scale float32, causal, bf16 bool) *Tensor {
	const name = "FlashAttentionBackward"
	checkFlash(name, qkv, "qkv", b*t*3*h*d, b, t, h, d)
	checkFlash(name, dy, "dy", b*t*h*d, b, t, h, d)
	checkFlash(name, y, "y", b*t*h*d, b, t, h, d)
	checkFlash(name, lse, "lse", b*h*t, b, t, h, d)
	k := table(name, dy, qkv, y, lse)
	need(k.FlashAttentionBackward != nil, name, qkv)
	dy, qkv, y, lse = dy.Contiguous(), qkv.Contiguous(), y.Contiguous(), lse.Contiguous()
	if dy.dtype != qkv.dtype { // a float64 gradient reaching a float32 op
		dy = AsType(dy, qkv.dtype)
	}
	dqkv := EmptyAs(qkv, qkv.shape...) // dq, dk and dv of every head cover it whole
	k.FlashAttentionBackward(dqkv, dy, qkv, y, lse, b, t, h, d, scale, causal, bf16 && qkv.dtype == Float32)
	return dqkv
}

// checkFlash panics unless x holds n elements of a positive geometry.
func checkFlash(op string, x *Tensor, what string, n, b, t, h, d int) {
	if b <= 0 || t <= 0 || h <= 0 || d <= 0 {
		panic(fmt.Sprintf("tensor: %s: B=%d T=%d H=%d D=%d must be positive", op, b, t, h, d))
	}
	if x.Numel() != n {
		panic(fmt.Sprintf("tensor: %s: %s of shape %v has %d elements, want %d for B=%d T=%d H=%d D=%d",
			op, what, x.shape, x.Numel(), n, b, t, h, d))
	}
}

// The host's kernel. Each (batch, head) pair is one attention problem,
// and the B·H of them are spread over Threads() goroutines, a head to a
// goroutine at a time: the tile products are too small to gain from the
// engine's own threads (below two of engine.c's minPartFlops slices), so
// each runs on its goroutine's thread.
// Within a head the queries go in blocks of flashTileQ rows and the keys in
// tiles of flashTileK, every product a Gemm on strided views into qkv (a
// head's rows are 3·H·D apart) and y, with the online softmax between the
// two products of a tile; causal attention skips the key tiles past the
// query block's last row. A worker's scratch is two tiles of scores and
// the per-row statistics, plus T values of FlashAttention-2's D in the
// backward, plus, with bf16, the head's q, k, v (and dy) rounded: nothing
// of size T².
//
// On a CPU with AVX-512 a float32 head whose D is a multiple of 16 (up to
// 256) runs instead as one call into flash_fused_kernels.c, with the same
// tiles and rounding points: its own register-blocked products with the
// row work in their epilogues, no Gemm call per product. The tiled path
// serves float64, other head sizes, other CPUs and builds without cgo.
//
// The tile sizes: forward and backward at B = 2, T = 1024, H = 12, D = 64
// on one thread (GODDP_NUM_THREADS=1) of a shared Xeon with AVX-512
// (oneDNN's sgemm), in CPU time: 64×128 (query rows × keys) 246-266 ms,
// 64×64 265, 128×64 239, 128×128 407-557 (2026-11-29). Tiles of 64 rows
// keep every product at or below 2^20 FLOPs, on its caller's thread.
// The key tile is part of the bf16 contract: the forward rounds each
// tile's e**(s - running max), which a tile of another size would round
// against another maximum; goddp/cuda/kernels' flash_attn_fwd_f32 updates
// its maximum every 128 keys too, so that both devices round alike.
const (
	flashTileQ = 64
	flashTileK = 128
)

// flashGeom is one call's layout: qkv [B, T, 3, H, D], y and dy
// [B, T, H, D], lse [B, H, T].
type flashGeom struct {
	b, t, h, d   int
	bq, bk       int
	causal, bf16 bool
}

// head returns the element offsets of head bi's queries (keys and values
// follow at +H·D and +2·H·D), of its output rows and of its lse row.
func (g *flashGeom) head(bi int) (xo, yo, lo int) {
	bb, hh := bi/g.h, bi%g.h
	return bb*g.t*3*g.h*g.d + hh*g.d, bb*g.t*g.h*g.d + hh*g.d, bi * g.t
}

func newFlashGeom(b, t, h, d int, causal, bf16 bool) *flashGeom {
	return &flashGeom{b: b, t: t, h: h, d: d, bq: min(flashTileQ, t), bk: min(flashTileK, t), causal: causal, bf16: bf16}
}

// scratch returns the elements a worker needs: scores and their gradient
// (bq×bk each), the rows' running maximum and sum (bq each), D (T, the
// backward's) and, with bf16, nr rounded [T, D] operands.
func (g *flashGeom) scratch(nr int) int {
	n := 2*g.bq*g.bk + 2*g.bq + g.t
	if g.bf16 {
		n += nr * g.t * g.d
	}
	return n
}

// parallelHeads runs fn(worker, bi) for every head bi over at most
// Threads() goroutines (the caller's included), handing the heads out one
// at a time, and gives each worker per elements of one scratch tensor of
// dt (from the host cache, back to it afterwards).
func parallelHeads[T float](dt DType, nb, per int, fn func(scratch []T, bi int)) {
	workers := max(1, min(Threads(), nb))
	buf := newFull(dt, workers*per)
	all := flashData[T](buf)
	var next atomic.Int64
	run := func(w int) {
		s := all[w*per : (w+1)*per]
		for {
			bi := int(next.Add(1)) - 1
			if bi >= nb {
				return
			}
			fn(s, bi)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(w)
		}()
	}
	run(0)
	wg.Wait()
	ReleaseScratch(buf)
}

// flashData returns t's contiguous elements as []T.
func flashData[T float](t *Tensor) []T {
	var z T
	if _, ok := any(z).(float32); ok {
		return any(f32s(t)).([]T)
	}
	return any(f64s(t)).([]T)
}

func cpuFlashAttention(y, lse, qkv *Tensor, b, t, h, d int, scale float32, causal, bf16 bool) {
	checkFlash("FlashAttention", y, "y", b*t*h*d, b, t, h, d)
	checkFlash("FlashAttention", lse, "lse", b*h*t, b, t, h, d)
	checkFlash("FlashAttention", qkv, "qkv", b*t*3*h*d, b, t, h, d)
	g := newFlashGeom(b, t, h, d, causal, bf16 && qkv.dtype == Float32)
	if qkv.dtype == Float64 {
		flashForward(g, f64s(y), f64s(lse), f64s(qkv), float64(scale))
		return
	}
	if flashFusedOK(d) {
		yf, lf, xf := f32s(y), f32s(lse), f32s(qkv)
		rec := recorder()
		parallelHeads(Float32, b*h, flashFusedScratch(false, g.bf16, t, d), func(sc []float32, bi int) {
			var t0 time.Time
			if rec != nil {
				t0 = time.Now()
			}
			flashFusedForward(g, yf, lf, xf, scale, sc, bi)
			if rec != nil {
				profileAttentionHead(rec, false, causal, g.bf16, t, d, t0)
			}
		})
		return
	}
	flashForward(g, f32s(y), f32s(lse), f32s(qkv), scale)
}

func cpuFlashAttentionBackward(dqkv, dy, qkv, y, lse *Tensor, b, t, h, d int, scale float32, causal, bf16 bool) {
	for _, c := range []struct {
		x    *Tensor
		what string
		n    int
	}{{dqkv, "dqkv", b * t * 3 * h * d}, {dy, "dy", b * t * h * d}, {qkv, "qkv", b * t * 3 * h * d}, {y, "y", b * t * h * d}, {lse, "lse", b * h * t}} {
		checkFlash("FlashAttentionBackward", c.x, c.what, c.n, b, t, h, d)
	}
	g := newFlashGeom(b, t, h, d, causal, bf16 && qkv.dtype == Float32)
	if qkv.dtype == Float64 {
		flashBackward(g, f64s(dqkv), f64s(dy), f64s(qkv), f64s(y), f64s(lse), float64(scale))
		return
	}
	if flashFusedOK(d) {
		gf, df, xf, yf, lf := f32s(dqkv), f32s(dy), f32s(qkv), f32s(y), f32s(lse)
		rec := recorder()
		parallelHeads(Float32, b*h, flashFusedScratch(true, g.bf16, t, d), func(sc []float32, bi int) {
			var t0 time.Time
			if rec != nil {
				t0 = time.Now()
			}
			flashFusedBackward(g, gf, df, xf, yf, lf, scale, sc, bi)
			if rec != nil {
				profileAttentionHead(rec, true, causal, g.bf16, t, d, t0)
			}
		})
		return
	}
	flashBackward(g, f32s(dqkv), f32s(dy), f32s(qkv), f32s(y), f32s(lse), scale)
}

// flashOperand is a head's q, k or v (or dy) as the products read it: a
// strided view into qkv, or its bfloat16 rounding in scratch.
func flashOperand[T float](g *flashGeom, x []T, off, ld int, rounded []T) ([]T, int) {
	if !g.bf16 {
		return x[off:], ld
	}
	flashRoundRows(any(rounded).([]float32), any(x[off:]).([]float32), g.t, g.d, ld)
	return rounded, g.d
}

func flashForward[T float](g *flashGeom, y, lse, qkv []T, scale T) {
	t, d, hd := g.t, g.d, g.h*g.d
	ldx := 3 * hd
	dt := Float32
	if _, ok := any(scale).(float64); ok {
		dt = Float64
	}
	parallelHeads(dt, g.b*g.h, g.scratch(3), func(sc []T, bi int) {
		s, mx, l := sc[:g.bq*g.bk], sc[2*g.bq*g.bk:2*g.bq*g.bk+g.bq], sc[2*g.bq*g.bk+g.bq:2*g.bq*g.bk+2*g.bq]
		rs := sc[g.scratch(0):]
		xo, yo, lo := g.head(bi)
		q, ldq := flashOperand(g, qkv, xo, ldx, rs)
		k, ldk := flashOperand(g, qkv, xo+hd, ldx, rs[min(len(rs), t*d):])
		v, ldv := flashOperand(g, qkv, xo+2*hd, ldx, rs[min(len(rs), 2*t*d):])
		for q0 := 0; q0 < t; q0 += g.bq {
			m := min(g.bq, t-q0)
			kEnd := t
			if g.causal {
				kEnd = q0 + m
			}
			for r := range m {
				mx[r], l[r] = T(math.Inf(-1)), 0
			}
			yq := y[yo+q0*hd:]
			for k0 := 0; k0 < kEnd; k0 += g.bk {
				n := min(g.bk, kEnd-k0)
				if next := k0 + g.bk; next < kEnd && !g.bf16 {
					prefetchTile(k[next*ldk:], min(g.bk, kEnd-next), ldk, d)
					prefetchTile(v[next*ldv:], min(g.bk, kEnd-next), ldv, d)
				}
				gemmT(false, true, m, n, d, scale, q[q0*ldq:], ldq, k[k0*ldk:], ldk, 0, s, n)
				flashFwdTile(s, m, n, n, q0, k0, g.causal, g.bf16, mx, l, yq, d, hd, k0 == 0)
				beta := T(1)
				if k0 == 0 {
					beta = 0
				}
				gemmT(false, false, m, d, n, 1, s, n, v[k0*ldv:], ldv, beta, yq, hd)
			}
			flashFwdFinish(yq, m, d, hd, mx, l, lse[lo+q0:])
		}
	})
}

func flashBackward[T float](g *flashGeom, dqkv, dy, qkv, y, lse []T, scale T) {
	t, d, hd := g.t, g.d, g.h*g.d
	ldx := 3 * hd
	dt := Float32
	if _, ok := any(scale).(float64); ok {
		dt = Float64
	}
	tile := g.bq * g.bk
	parallelHeads(dt, g.b*g.h, g.scratch(4), func(sc []T, bi int) {
		s, dp, dd := sc[:tile], sc[tile:2*tile], sc[2*tile+2*g.bq:2*tile+2*g.bq+t]
		rs := sc[g.scratch(0):]
		xo, yo, lo := g.head(bi)
		q, ldq := flashOperand(g, qkv, xo, ldx, rs)
		k, ldk := flashOperand(g, qkv, xo+hd, ldx, rs[min(len(rs), t*d):])
		v, ldv := flashOperand(g, qkv, xo+2*hd, ldx, rs[min(len(rs), 2*t*d):])
		gy, ldg := flashOperand(g, dy, yo, hd, rs[min(len(rs), 3*t*d):])
		// D = Σ dy·y row by row (FlashAttention-2's D_i, each row's Σ_j
		// dp·p), with dy as the products see it.
		flashRowDot(dd, gy, ldg, y[yo:], hd, t, d)
		dq, dk, dv := dqkv[xo:], dqkv[xo+hd:], dqkv[xo+2*hd:]
		for r := range t {
			clear(dq[r*ldx : r*ldx+d])
		}
		for k0 := 0; k0 < t; k0 += g.bk {
			n := min(g.bk, t-k0)
			qStart := 0
			if g.causal { // the first query block holding a query that sees key k0
				qStart = k0 / g.bq * g.bq
			}
			for q0 := qStart; q0 < t; q0 += g.bq {
				m := min(g.bq, t-q0)
				if next := q0 + g.bq; next < t && !g.bf16 {
					prefetchTile(q[next*ldq:], min(g.bq, t-next), ldq, d)
					prefetchTile(gy[next*ldg:], min(g.bq, t-next), ldg, d)
				}
				gemmT(false, true, m, n, d, scale, q[q0*ldq:], ldq, k[k0*ldk:], ldk, 0, s, n)
				gemmT(false, true, m, n, d, 1, gy[q0*ldg:], ldg, v[k0*ldv:], ldv, 0, dp, n)
				flashBwdTile(s, dp, m, n, n, q0, k0, g.causal, g.bf16, lse[lo+q0:], dd[q0:])
				beta := T(1)
				if q0 == qStart {
					beta = 0
				}
				gemmT(true, false, n, d, m, 1, s, n, gy[q0*ldg:], ldg, beta, dv[k0*ldx:], ldx)
				gemmT(true, false, n, d, m, scale, dp, n, q[q0*ldq:], ldq, beta, dk[k0*ldx:], ldx)
				gemmT(false, false, m, d, n, scale, dp, n, k[k0*ldk:], ldk, 1, dq[q0*ldx:], ldx)
			}
		}
	})
}

// prefetchTile starts loading the next tile's strided rows (float32; see
// PrefetchRowsF32) while this tile's products run.
func prefetchTile[T float](x []T, rows, ld, cols int) {
	if f, ok := any(x).([]float32); ok {
		PrefetchRowsF32(f, rows, ld, cols)
	}
}

// gemmT is Gemm or Gemm64 by T.
func gemmT[T float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if af, ok := any(a).([]float32); ok {
		Gemm(transA, transB, m, n, k, float32(alpha), af, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
		return
	}
	Gemm64(transA, transB, m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, float64(beta),
		any(c).([]float64), ldc)
}

// flashVisible is how many of the n keys k0.. query q0+r sees.
func flashVisible(n, q0, k0, r int, causal bool) int {
	if !causal {
		return n
	}
	return max(0, min(n, q0+r-k0+1))
}

// flashFwdTile is goddp_flash_fwd_tile_f32 (flash_attention_kernels.c):
// the online softmax of one tile of scores s (m×n, stride lds), which
// become e**(s - running max); mx and l are the rows' running maximum and
// sum, and the output rows o (stride ldo) so far are rescaled unless first.
func flashFwdTile[T float](s []T, m, n, lds, q0, k0 int, causal, bf16 bool, mx, l, o []T, d, ldo int, first bool) {
	if flashFwdTileC(s, m, n, lds, q0, k0, causal, bf16, mx, l, o, d, ldo, first) {
		return
	}
	for r := range m {
		row := s[r*lds : r*lds+n]
		v := flashVisible(n, q0, k0, r, causal)
		clear(row[v:])
		if v == 0 {
			continue
		}
		old, nm := mx[r], mx[r]
		for _, x := range row[:v] {
			nm = max(nm, x)
		}
		for j := range row[:v] {
			row[j] -= nm
		}
		expInPlace(row[:v])
		var sum T
		for _, e := range row[:v] {
			sum += e
		}
		c := T(0)
		if !math.IsInf(float64(old), -1) {
			c = T(math.Exp(float64(old - nm)))
		}
		l[r] = l[r]*c + sum
		mx[r] = nm
		if !first && c != 1 {
			orow := o[r*ldo : r*ldo+d]
			for j := range orow {
				orow[j] *= c
			}
		}
		if f, ok := any(row[:v]).([]float32); ok && bf16 {
			roundBF16s(f, f)
		}
	}
}

// flashFwdFinish divides the m output rows by their sums and writes their
// log-sum-exp.
func flashFwdFinish[T float](o []T, m, d, ldo int, mx, l, lse []T) {
	if flashFwdFinishC(o, m, d, ldo, mx, l, lse) {
		return
	}
	for r := range m {
		inv := 1 / l[r]
		for j := range d {
			o[r*ldo+j] *= inv
		}
		lse[r] = mx[r] + T(math.Log(float64(l[r])))
	}
}

// flashBwdTile turns the tile's scores s into the probabilities
// e**(s - lse) and dp into the scores' gradient p ⊙ (dp - dd), row by row.
func flashBwdTile[T float](s, dp []T, m, n, ld, q0, k0 int, causal, bf16 bool, lse, dd []T) {
	if flashBwdTileC(s, dp, m, n, ld, q0, k0, causal, bf16, lse, dd) {
		return
	}
	for r := range m {
		sr, dr := s[r*ld:r*ld+n], dp[r*ld:r*ld+n]
		v := flashVisible(n, q0, k0, r, causal)
		for j := range sr[:v] {
			sr[j] -= lse[r]
		}
		expInPlace(sr[:v])
		for j, p := range sr[:v] {
			dr[j] = p * (dr[j] - dd[r])
		}
		clear(sr[v:])
		clear(dr[v:])
		if bf16 {
			roundBF16s(any(sr[:v]).([]float32), any(sr[:v]).([]float32))
			roundBF16s(any(dr[:v]).([]float32), any(dr[:v]).([]float32))
		}
	}
}

// flashRowDot writes dd[r] = Σ_j dy[r, j]·y[r, j] for m rows of d.
func flashRowDot[T float](dd, dy []T, lddy int, y []T, ldy, m, d int) {
	if flashRowDotC(dd, dy, lddy, y, ldy, m, d) {
		return
	}
	for r := range m {
		var sum T
		for j := range d {
			sum += dy[r*lddy+j] * y[r*ldy+j]
		}
		dd[r] = sum
	}
}
