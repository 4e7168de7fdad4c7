package devtensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Fused causal attention (tensor.Kernels' FlashAttention and
// FlashAttentionBackward) on kernels.cu's flash_attn_* kernels: a block is
// a tile of flashBlock query rows (forward, dQ) or key rows (dK, dV) of one
// (batch, head), a thread per row.

// flashBlock is the rows of a tile and the threads of a block: 64 keeps a
// GPT-2 head (T = 1024) at 16 blocks per (batch, head) and a row's
// thread-local vectors (4·D floats at most) within what a block of 64 can
// hold; the kernels work with any block size.
const flashBlock = 64

// flashMaxD is kernels.cu's FA_MAXD: the thread-local vectors' length.
const flashMaxD = 128

// flashArgs checks the operands' sizes against [B, T, 3, H, D] and returns
// the grid: a block per tile of (batch, head).
func flashArgs(op string, qkv, y, lse *tensor.Tensor, b, t, h, d int) int {
	if b < 0 || t < 0 || h < 0 || d < 0 {
		panic(fmt.Sprintf("devtensor: %s: negative shape b=%d t=%d h=%d d=%d", op, b, t, h, d))
	}
	if d > flashMaxD {
		panic(fmt.Sprintf("devtensor: %s: head size %d over the kernels' %d", op, d, flashMaxD))
	}
	bnArgs(op+" (qkv [B, T, 3, H, D])", b*t*3*h*d, qkv)
	bnArgs(op+" (y [B, T, H, D])", b*t*h*d, y)
	bnArgs(op+" (lse [B, H, T])", b*h*t, lse)
	return min(max(1, (t+flashBlock-1)/flashBlock*b*h), maxGrid)
}

// launchBlock is launch with a block of threads threads.
func (d *Device) launchBlock(kernel string, grid, threads int, args ...uint64) {
	if err := d.l.Launch(kernel, grid, threads, args...); err != nil {
		panic(fmt.Sprintf("devtensor: %v", err))
	}
}

func (d *Device) flashAttention(y, lse, qkv *tensor.Tensor, b, t, h, hd int, scale float32, causal, bf16 bool) {
	const op = "flash attention"
	g := flashArgs(op, qkv, y, lse, b, t, h, hd)
	if b*t*h == 0 {
		return
	}
	d.launchBlock("flash_attn_fwd_f32", g, flashBlock, d.ptr(op, y), d.ptr(op, lse), d.ptr(op, qkv),
		i64(b), i64(t), i64(h), i64(hd), f32(scale), flag(causal), flag(bf16))
}

// flashAttentionBackward runs the three backward kernels: D = Σ dy·y a
// row into a scratch block, then dK and dV by key tiles and dQ by query
// tiles, each writing its part of dqkv (no atomics: deterministic).
func (d *Device) flashAttentionBackward(dqkv, dy, qkv, y, lse *tensor.Tensor, b, t, h, hd int, scale float32, causal, bf16 bool) {
	const op = "flash attention backward"
	g := flashArgs(op, qkv, y, lse, b, t, h, hd)
	bnArgs(op+" (dqkv [B, T, 3, H, D])", b*t*3*h*hd, dqkv)
	bnArgs(op+" (dy [B, T, H, D])", b*t*h*hd, dy)
	if b*t*h == 0 {
		return
	}
	dd := d.scratch(b*h*t, 4)
	d.launch("flash_attn_bwd_dot_f32", grid(b*h*t), dd.mem.Ptr(), d.ptr(op, dy), d.ptr(op, y), i64(b), i64(t), i64(h), i64(hd), flag(bf16))
	args := []uint64{d.ptr(op, dqkv), d.ptr(op, dy), d.ptr(op, qkv), d.ptr(op, lse), dd.mem.Ptr(),
		i64(b), i64(t), i64(h), i64(hd), f32(scale), flag(causal), flag(bf16)}
	d.launchBlock("flash_attn_bwd_f32", g, flashBlock, args...)
	d.launchBlock("flash_attn_bwd_dq_f32", g, flashBlock, args...)
	dd.Release() // the launches above are queued before any later user of the block
}
