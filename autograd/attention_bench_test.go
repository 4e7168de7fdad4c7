package autograd

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/goddp/goddp/tensor"
)

// BenchmarkSelfAttention times SelfAttention's forward and backward at the
// shape of examples/gpt's blocks (B 32, T 64, 4 heads of 32) and at a
// GPT-2 head's (B 2, T 256, 12 heads of 64), causal, with float32 and
// bfloat16 products: the host path the CPU's table entries run.
func BenchmarkSelfAttention(b *testing.B) {
	for _, s := range []struct{ b, t, heads, dh int }{{32, 64, 4, 32}, {2, 256, 12, 64}} {
		for _, prec := range []tensor.Precision{0, tensor.PrecisionBFloat16} {
			name := "f32"
			if prec == tensor.PrecisionBFloat16 {
				name = "bf16"
			}
			b.Run(fmt.Sprintf("B%d_T%d_H%d_D%d/%s", s.b, s.t, s.heads, s.dh, name), func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				qkv := Param(randF32(r, 1, s.b, s.t, 3*s.heads*s.dh))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					y := SelfAttention(qkv, s.heads, AttentionOptions{Causal: true, Precision: prec})
					if err := SumAll(y).Backward(); err != nil {
						b.Fatal(err)
					}
					y.FreeGraph()
					qkv.ZeroGrad()
				}
			})
		}
	}
}
