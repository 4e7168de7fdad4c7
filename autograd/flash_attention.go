package autograd

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/tensor"
)

// FlashSelfAttention is SelfAttention computed as FlashAttention does: tile
// by tile with an online softmax, keeping for the backward only each query
// row's log-sum-exp, from which the backward recomputes the probabilities
// (FlashAttention-2's). It is torch's
//
//	q, k, v = qkv.view(B, T, 3, heads, E//heads).unbind(2)
//	y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
//	        v.transpose(1, 2), is_causal=o.Causal, scale=o.Scale)
//	y.transpose(1, 2).reshape(B, T, E)
//
// on a GPT's packed projection qkv [B, T, 3E], with the flash backend: the
// result [B, T, E] is SelfAttention's within float32 rounding, but neither
// direction stores the [B, heads, T, T] probabilities, which at GPT-2's
// T = 1024 are 48 MiB a layer and sample. It runs the FlashAttention and
// FlashAttentionBackward entries of qkv's device (the host's kernel is
// tensor/cpu_flash_attention.go) and keeps qkv, the output and the
// log-sum-exp there. o.Mask is not supported (no tile skips an arbitrary
// mask); o.Precision bfloat16 rounds the products' operands as
// SelfAttention's does (float32 qkv only).
func FlashSelfAttention(qkv *Variable, heads int, o AttentionOptions) *Variable {
	sh := qkv.Value.Shape()
	if len(sh) != 3 || heads <= 0 || sh[2]%(3*heads) != 0 || sh[0] == 0 || sh[1] == 0 || sh[2] == 0 {
		panic(fmt.Sprintf("autograd: FlashSelfAttention: qkv of shape %v with %d heads (want non-empty [B, T, 3E] with E divisible by heads)", sh, heads))
	}
	if o.Mask != nil {
		panic(fmt.Sprintf("autograd: FlashSelfAttention: a mask of shape %v is not supported (only Causal); use SelfAttention", o.Mask.Shape()))
	}
	b, t, e := sh[0], sh[1], sh[2]/3
	op := &flashAttentionOp{inputs: ins(qkv), b: b, t: t, h: heads, d: e / heads, causal: o.Causal,
		bf16: o.Precision == tensor.PrecisionBFloat16}
	op.scale = float32(o.Scale)
	if o.Scale == 0 {
		op.scale = float32(1 / math.Sqrt(float64(op.d)))
	}
	op.x = qkv.Value.Contiguous()
	op.y, op.lse = tensor.FlashAttention(op.x, b, t, heads, op.d, op.scale, op.causal, op.bf16)
	return FromOp(op.y, op)
}

// flashAttentionOp keeps what FlashAttention-2's backward reads: qkv, the
// output and the rows' log-sum-exp, on the op's device.
type flashAttentionOp struct {
	inputs
	x, y, lse  *tensor.Tensor
	b, t, h, d int
	scale      float32
	causal     bool
	bf16       bool
}

func (o *flashAttentionOp) Name() string { return "FlashSelfAttention" }
func (o *flashAttentionOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the log-sum-exp and a contiguous
// copy of qkv the op made (the output is the graph's value, freed with it).
func (o *flashAttentionOp) savedTensors() []*tensor.Tensor {
	if o.x != o.in(0).Value {
		return []*tensor.Tensor{o.lse, o.x}
	}
	return []*tensor.Tensor{o.lse}
}

func (o *flashAttentionOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.FlashAttentionBackward(gy, o.x, o.y, o.lse, o.b, o.t, o.h, o.d, o.scale, o.causal, o.bf16)}
}
