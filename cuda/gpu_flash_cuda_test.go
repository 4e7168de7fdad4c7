//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// The fused attention's kernels (kernels.cu's flash_attn_*, through
// goddp/cuda/devtensor's FlashAttention and FlashAttentionBackward
// entries) on the GPU against the host's kernel: y, lse and dqkv for odd
// shapes and GPT-2's (T = 1024, 12 heads of 64), causal or not, bf16 or
// not; and the backward twice gives the same bits (no atomics). goddp/cuda/sim
// runs the same comparisons in CI; here the driver's JIT of the PTX (or
// the sm_80/sm_90 cubins) and the GPU's own scheduling are what is new.
func TestGPUFlashAttentionMatchesCPU(t *testing.T) {
	c := newContext(t)
	dev := c.Tensors()
	rng := tensor.NewRNG(41)
	for _, s := range []struct{ b, t, h, d int }{{2, 1, 1, 8}, {1, 37, 3, 16}, {2, 130, 2, 64}, {1, 70, 1, 128}, {2, 1024, 12, 64}} {
		for _, causal := range []bool{false, true} {
			for _, bf16 := range []bool{false, true} {
				t.Run(fmt.Sprintf("B%d_T%d_H%d_D%d_causal=%v_bf16=%v", s.b, s.t, s.h, s.d, causal, bf16), func(t *testing.T) {
					qkv := tensor.Randn(rng, tensor.Float32, s.b, s.t, 3, s.h, s.d)
					dy := tensor.Randn(rng, tensor.Float32, s.b, s.t, s.h, s.d)
					scale := float32(1 / math.Sqrt(float64(s.d)))
					run := func(d tensor.Device) (y, lse, dqkv, again []float32) {
						k := d.Kernels()
						yt, lt := tensor.MustZerosOn(d, s.b, s.t, s.h, s.d), tensor.MustZerosOn(d, s.b, s.h, s.t)
						q, g := qkv.MustTo(d), dy.MustTo(d)
						k.FlashAttention(yt, lt, q, s.b, s.t, s.h, s.d, scale, causal, bf16)
						back := func() []float32 {
							dq := tensor.Full(tensor.Float32, math.NaN(), qkv.Shape()...).MustTo(d)
							k.FlashAttentionBackward(dq, g, q, yt, lt, s.b, s.t, s.h, s.d, scale, causal, bf16)
							return dq.MustTo(tensor.CPU()).F32()
						}
						return yt.MustTo(tensor.CPU()).F32(), lt.MustTo(tensor.CPU()).F32(), back(), back()
					}
					wy, wl, wd, _ := run(tensor.CPU())
					gy, gl, gd, again := run(dev)
					flashNear(t, wy, gy, bf16, "y")
					flashNear(t, wl, gl, bf16, "lse")
					flashNear(t, wd, gd, bf16, "dqkv")
					require.Equal(t, gd, again, "the backward run twice on the GPU")
				})
			}
		}
	}
}

// flashNear checks got against want within 1e-4 relative to the larger of
// |want| and want's RMS; with bf16 up to 5% of the elements may be off by
// up to a bfloat16 unit (2^-8) of that size, where a probability or a
// score's gradient rounds to the neighbouring bfloat16 value on one side
// (the sums' orders differ: cuda/sim's flash_attention_test.go says more).
func flashNear(t *testing.T, want, got []float32, bf16 bool, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	var ss float64
	for _, v := range want {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	flips := 0
	for i, w := range want {
		d := math.Abs(float64(w)-float64(got[i])) / max(math.Abs(float64(w)), rms)
		switch {
		case d <= 1e-4:
		case bf16 && d <= 1.0/256:
			flips++
		default:
			t.Fatalf("%s: element %d of %d: got %v, want %v", what, i, len(want), got[i], w)
		}
	}
	if flips > len(want)/20 {
		t.Fatalf("%s: %d of %d elements off by more than 1e-4 (at most 5%% may be, by a bfloat16 rounding's flip)", what, flips, len(want))
	}
}
