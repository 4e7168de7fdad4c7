package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Conv2dReLUMaxPool2d gives MaxPool2d(Conv2dReLU)'s output and gradients
// bit for bit, as one node where the engine has the fused convolution,
// over odd sizes (a row and a column in no window), a bias that leaves
// whole windows at zero (their gradient must not pass), and a graph that
// goes on after the pooling.
func TestConv2dReLUMaxPool2dMatchesTheOps(t *testing.T) {
	cases := []struct {
		name string
		x, w []int
		cp   ConvParams
	}{
		{"3x3 pad 1, even", []int{3, 2, 8, 8}, []int{4, 2, 3, 3}, ConvParams{Padding: [2]int{1, 1}}},
		{"5x5 pad 2, odd sizes", []int{2, 3, 9, 7}, []int{5, 3, 5, 5}, ConvParams{Padding: [2]int{2, 2}}},
	}
	pp := PoolParams{Kernel: [2]int{2, 2}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := tensor.NewRNG(3)
			xv, wv := tensor.Randn(rng, tensor.Float32, c.x...), tensor.Randn(rng, tensor.Float32, c.w...)
			// A negative bias puts some channels mostly below zero, so that
			// whole windows pool a ReLU's 0.
			bv := tensor.Randn(rng, tensor.Float32, c.w[0])
			bv.F32()[0] = -8
			run := func(fused bool) (y []float32, grads [][]float32, name string) {
				x, w, b := Param(xv.Clone()), Param(wv.Clone()), Param(bv.Clone())
				var out *Variable
				if fused {
					out = Conv2dReLUMaxPool2d(x, w, b, c.cp, pp)
				} else {
					out = MaxPool2d(Conv2dReLU(x, w, b, c.cp), pp)
				}
				name = out.creator.Name()
				y = append([]float32(nil), out.Value.F32()...)
				// The graph goes on: a weighted sum, so each pooled
				// output's gradient differs.
				loss := SumAll(Mul(out, Const(tensor.Randn(tensor.NewRNG(9), tensor.Float32, out.Value.Shape()...))))
				require.NoError(t, loss.Backward())
				for _, v := range []*Variable{x, w, b} {
					grads = append(grads, append([]float32(nil), v.Grad.F32()...))
				}
				loss.FreeGraph()
				return y, grads, name
			}
			y0, g0, _ := run(false)
			y1, g1, name := run(true)
			geom := newConvGeom(c.x, c.w, c.cp)
			s := geom.engineShape(c.x[0])
			if tensor.Conv2dKernel(&s, "fwd", true) != "" {
				require.Equal(t, "Conv2dReLUMaxPool2d", name, "the engine has the kernel: one fused op")
			}
			zeros := 0
			for i := range y0 {
				require.Equal(t, math.Float32bits(y0[i]), math.Float32bits(y1[i]), "y[%d]", i)
				if y0[i] == 0 {
					zeros++
				}
			}
			require.Greater(t, zeros, 0, "some windows pool a ReLU's zero")
			require.Less(t, zeros, len(y0)/2)
			for k := range g0 {
				require.Len(t, g1[k], len(g0[k]))
				for i := range g0[k] {
					require.Equal(t, math.Float32bits(g0[k][i]), math.Float32bits(g1[k][i]), "gradient %d, element %d", k, i)
				}
			}
		})
	}
}

// Where the engine has no fused kernel (float64 here),
// Conv2dReLUMaxPool2d is still one op, and its gradient matches finite
// differences; a pooling other than 2x2 is Conv2dReLU and MaxPool2d.
func TestConv2dReLUMaxPool2dFallbackGradCheck(t *testing.T) {
	cp, pp := ConvParams{Padding: [2]int{1, 1}}, PoolParams{Kernel: [2]int{2, 2}}
	gradCheck(t, func(xs []*Variable) *Variable { return Conv2dReLUMaxPool2d(xs[0], xs[1], xs[2], cp, pp) },
		randT(1, 1, 0, 2, 2, 6, 6), randT(2, 0.5, 0, 3, 2, 3, 3), randT(3, 0.5, 0, 3))
	out := Conv2dReLUMaxPool2d(Param(randT(1, 1, 0, 2, 2, 6, 6)), Param(randT(2, 1, 0, 3, 2, 3, 3)), nil, cp, pp)
	require.Equal(t, "Conv2dReLUMaxPool2d", out.creator.Name())
	out = Conv2dReLUMaxPool2d(Param(randT(1, 1, 0, 2, 2, 6, 6)), Param(randT(2, 1, 0, 3, 2, 3, 3)), nil, cp,
		PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}})
	require.Equal(t, "MaxPool2d", out.creator.Name())
}
