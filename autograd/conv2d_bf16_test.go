package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// TestConv2dBF16 checks autocast's bf16 convolution, forward and the three
// gradients, against float64 convolutions of the bf16-rounded operands
// (the incoming gradient rounded too, as a bf16 backward reads it). The
// default build runs oneDNN's bf16 primitives; the pure-Go build the
// im2col path with GemmBF16.
func TestConv2dBF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []int
		ws   []int
		p    ConvParams
	}{
		{"5x5 pad 2", []int{3, 4, 11, 9}, []int{6, 4, 5, 5}, ConvParams{Padding: [2]int{2, 2}}},
		{"stride 2 groups 2", []int{2, 4, 9, 10}, []int{6, 2, 3, 3}, ConvParams{Stride: [2]int{2, 2}, Groups: 2, Padding: [2]int{1, 1}}},
		{"1x1", []int{2, 8, 5, 5}, []int{4, 8, 1, 1}, ConvParams{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := tensor.NewRNG(11)
			x32 := rng.Normal(tensor.Float32, 0, 1, tc.xs...)
			w32 := rng.Normal(tensor.Float32, 0, 1, tc.ws...)
			b32 := rng.Normal(tensor.Float32, 0, 1, tc.ws[0])
			x, w, b := Param(x32), Param(w32), Param(b32)
			p := tc.p
			p.Precision = tensor.PrecisionBFloat16
			y := Conv2d(x, w, b, p)
			gy := rng.Normal(tensor.Float32, 0, 1, y.Shape()...)
			require.NoError(t, SumAll(Mul(y, Const(gy))).Backward())

			r64 := func(t32 *tensor.Tensor, round bool) *tensor.Tensor {
				d := t32.Contiguous().F32()
				out := make([]float64, len(d))
				for i, v := range d {
					if round {
						v = tensor.RoundBF16(v)
					}
					out[i] = float64(v)
				}
				return tensor.FromF64(out, t32.Shape()...)
			}
			xr, wr, br := Param(r64(x32, true)), Param(r64(w32, true)), Param(r64(b32, false))
			yr := Conv2d(xr, wr, br, tc.p)
			require.NoError(t, SumAll(Mul(yr, Const(r64(gy, true)))).Backward())

			near := func(what string, got *tensor.Tensor, want *tensor.Tensor, rel float64) {
				g, wv := got.Contiguous().F32(), want.Contiguous().F64()
				var scale float64
				for _, v := range wv {
					scale = max(scale, math.Abs(v))
				}
				for i := range g {
					require.InDelta(t, wv[i], float64(g[i]), rel*scale, "%s[%d]", what, i)
				}
			}
			near("y", y.Value, yr.Value, 1e-5)
			near("dx", x.Grad, xr.Grad, 1e-5)
			near("dw", w.Grad, wr.Grad, 1e-5)
			near("db", b.Grad, br.Grad, 1e-2) // oneDNN sums the bf16 gradient, im2col the float32 one

			// And bf16 is really in use: the float32 convolution differs.
			y32 := Conv2d(Const(x32), Const(w32), Const(b32), tc.p).Value.Contiguous().F32()
			var d float64
			for i, v := range y.Value.Contiguous().F32() {
				d = max(d, math.Abs(float64(v-y32[i])))
			}
			require.Greater(t, d, 1e-3, "the bf16 convolution equals the float32 one")
		})
	}
}
