package tensor

import (
	"fmt"
	"math"
	"testing"
)

// The fused kernels (flash_fused_kernels.c) give the tiled path's values
// and gradients (cpu_flash_attention.go's flashForward and flashBackward,
// a Gemm per product) at head sizes from 16 to 256, T below, at and past
// the key tile and the query block (1, 17, 64, 128, 129, 200, 300), causal
// and not, with float32 and bf16 products. The two sum in other orders,
// so float32 results agree to float32 rounding; with bf16 a probability
// or a scores' gradient that lies near a rounding boundary may round the
// other way, which moves the results by a bfloat16 step of that one term.
func TestFlashFusedMatchesTiled(t *testing.T) {
	if !flashFusedOK(64) {
		t.Skip("no fused attention kernels in this build or on this CPU (AVX-512)")
	}
	shapes := []struct{ b, t, h, d int }{
		{1, 1, 1, 16}, {2, 17, 2, 32}, {1, 64, 1, 256}, {1, 129, 1, 48}, {2, 200, 2, 64}, {1, 300, 1, 80}, {1, 128, 1, 128},
	}
	for _, sh := range shapes {
		for _, causal := range []bool{true, false} {
			for _, bf16 := range []bool{false, true} {
				t.Run(fmt.Sprintf("B%dT%dH%dD%d/causal=%v/bf16=%v", sh.b, sh.t, sh.h, sh.d, causal, bf16), func(t *testing.T) {
					rng := NewRNG(uint64(sh.t*31 + sh.d))
					qkv := rng.Uniform(Float32, -1.5, 1.5, sh.b, sh.t, 3*sh.h*sh.d)
					dy := rng.Uniform(Float32, -1, 1, sh.b, sh.t, sh.h*sh.d)
					scale := float32(1 / math.Sqrt(float64(sh.d)))
					y, lse := FlashAttention(qkv, sh.b, sh.t, sh.h, sh.d, scale, causal, bf16)
					dx := FlashAttentionBackward(dy, qkv, y, lse, sh.b, sh.t, sh.h, sh.d, scale, causal, bf16)

					g := newFlashGeom(sh.b, sh.t, sh.h, sh.d, causal, bf16)
					wy, wl, wdx := make([]float32, y.Numel()), make([]float32, lse.Numel()), make([]float32, dx.Numel())
					flashForward(g, wy, wl, qkv.F32(), scale)
					// The backward reads the fused forward's y and lse, so that
					// the comparison is of the backward alone.
					flashBackward(g, wdx, dy.F32(), qkv.F32(), y.F32(), lse.F32(), scale)

					tol := map[bool]float64{false: 1e-6, true: 5e-4}[bf16]
					for _, c := range []struct {
						what      string
						got, want []float32
					}{{"y", y.F32(), wy}, {"lse", lse.F32(), wl}, {"dqkv", dx.F32(), wdx}} {
						worst, at := 0.0, 0
						for i, w := range c.want {
							if e := math.Abs(float64(c.got[i]-w)) / (1 + math.Abs(float64(w))); e > worst || math.IsNaN(e) {
								worst, at = e, i
							}
						}
						t.Logf("%s: largest relative difference %.3g", c.what, worst)
						if !(worst <= tol) {
							t.Errorf("%s[%d] = %v, tiled %v (relative difference %.3g > %.3g)", c.what, at, c.got[at], c.want[at], worst, tol)
						}
					}
				})
			}
		}
	}
}
