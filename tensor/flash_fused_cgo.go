//go:build cgo && !noblas

package tensor

// #include <stdint.h>
// int goddp_flash_fused_ok(int64_t d);
// int64_t goddp_flash_fused_scratch(int backward, int bf16, int64_t t, int64_t d);
// void goddp_flash_fwd_head_f32(const float *q, const float *k, const float *v, int64_t ldx, float *y, int64_t ldy, float *lse, int64_t t, int64_t d, float scale, int causal, int bf16, float *scratch);
// void goddp_flash_bwd_head_f32(const float *q, const float *k, const float *v, int64_t ldx, const float *dy, const float *y, int64_t ldy, const float *lse, float *dq, float *dk, float *dv, int64_t t, int64_t d, float scale, int causal, int bf16, float *scratch);
import "C"

// flashFusedOK reports whether flash_fused_kernels.c serves heads of d
// float32 values on this CPU (AVX-512, d a multiple of 16 up to 256).
func flashFusedOK(d int) bool { return C.goddp_flash_fused_ok(C.int64_t(d)) != 0 }

// flashFusedScratch is the float32 elements one head's forward (or
// backward) uses on its worker.
func flashFusedScratch(backward, bf16 bool, t, d int) int {
	return int(C.goddp_flash_fused_scratch(cbool(backward), cbool(bf16), C.int64_t(t), C.int64_t(d)))
}

// flashFusedForward runs head bi's forward: its q, k and v start at xo of
// qkv (rows 3·H·D apart, k and v H·D and 2·H·D further), its output rows
// at yo of y (rows H·D apart), its lse at lo. The caller has checked the
// sizes.
func flashFusedForward(g *flashGeom, y, lse, qkv []float32, scale float32, sc []float32, bi int) {
	xo, yo, lo := g.head(bi)
	hd := g.h * g.d
	C.goddp_flash_fwd_head_f32(cf(qkv[xo:]), cf(qkv[xo+hd:]), cf(qkv[xo+2*hd:]), C.int64_t(3*hd), cf(y[yo:]),
		C.int64_t(hd), cf(lse[lo:]), C.int64_t(g.t), C.int64_t(g.d), C.float(scale), cbool(g.causal), cbool(g.bf16),
		cf(sc))
}

// flashFusedBackward runs head bi's backward into dqkv (qkv's layout).
func flashFusedBackward(g *flashGeom, dqkv, dy, qkv, y, lse []float32, scale float32, sc []float32, bi int) {
	xo, yo, lo := g.head(bi)
	hd := g.h * g.d
	C.goddp_flash_bwd_head_f32(cf(qkv[xo:]), cf(qkv[xo+hd:]), cf(qkv[xo+2*hd:]), C.int64_t(3*hd), cf(dy[yo:]),
		cf(y[yo:]), C.int64_t(hd), cf(lse[lo:]), cf(dqkv[xo:]), cf(dqkv[xo+hd:]), cf(dqkv[xo+2*hd:]), C.int64_t(g.t),
		C.int64_t(g.d), C.float(scale), cbool(g.causal), cbool(g.bf16), cf(sc))
}
