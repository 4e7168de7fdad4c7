package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Conv2dReLU gives ReLU(Conv2d)'s output and gradients exactly, on the
// fused kernel where the engine has one (the op is then one node named
// Conv2dReLU), and its two backward paths agree: gy shared (masked into a
// new tensor) and gy handed over (masked in place).
func TestConv2dReLUMatchesTheTwoOps(t *testing.T) {
	cases := []struct {
		name    string
		x, w    []int
		bias    bool
		p       ConvParams
		threads int
	}{
		{"5x5 pad 2 bias", []int{3, 2, 9, 8}, []int{4, 2, 5, 5}, true, ConvParams{Padding: [2]int{2, 2}}, 1},
		{"3x3 stride 2 no bias", []int{2, 3, 7, 7}, []int{5, 3, 3, 3}, false, ConvParams{Stride: [2]int{2, 2}}, 1},
		{"grouped, two threads", []int{5, 4, 6, 6}, []int{6, 2, 3, 3}, true, ConvParams{Padding: [2]int{1, 1}, Groups: 2}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev := tensor.Threads()
			tensor.SetThreads(c.threads)
			defer tensor.SetThreads(prev)
			rng := tensor.NewRNG(7)
			xv, wv := tensor.Randn(rng, tensor.Float32, c.x...), tensor.Randn(rng, tensor.Float32, c.w...)
			var bv *tensor.Tensor
			if c.bias {
				bv = tensor.Randn(rng, tensor.Float32, c.w[0])
			}
			var paths [2][]*tensor.Tensor // the fused op's Backward and backwardInPlace
			run := func(fused bool) (y []float32, grads [][]float32, name string) {
				x, w := Param(xv.Clone()), Param(wv.Clone())
				var b *Variable
				if bv != nil {
					b = Param(bv.Clone())
				}
				var out *Variable
				if fused {
					out = Conv2dReLU(x, w, b, c.p)
				} else {
					out = ReLU(Conv2d(x, w, b, c.p))
				}
				name = out.creator.Name()
				y = append([]float32(nil), out.Value.F32()...)
				gy := tensor.Randn(tensor.NewRNG(9), tensor.Float32, out.Value.Shape()...)
				if op, ok := out.creator.(*conv2dReLUOp); ok {
					paths[0] = op.Backward(gy.Clone())
					paths[1] = op.backwardInPlace(gy.Clone())
				}
				require.NoError(t, out.BackwardWith(gy))
				for _, v := range []*Variable{x, w, b} {
					if v != nil {
						grads = append(grads, append([]float32(nil), v.Grad.F32()...))
					}
				}
				return y, grads, name
			}
			y0, g0, _ := run(false)
			y1, g1, name := run(true)
			geom := newConvGeom(c.x, c.w, c.p)
			s := geom.engineShape(c.x[0])
			if tensor.Conv2dKernel(&s, "fwd", c.bias) != "" {
				require.Equal(t, "Conv2dReLU", name, "the engine has the kernel: one fused op")
				require.Equal(t, len(paths[0]), len(paths[1]))
				for k := range paths[0] {
					require.Equal(t, paths[0][k].F32(), paths[1][k].F32(), "gradient %d: the two backward paths", k)
				}
			}
			require.Len(t, y1, len(y0))
			positive := 0
			for i := range y0 {
				require.True(t, y0[i] == y1[i], "y[%d]: %g against %g", i, y1[i], y0[i]) // ±0 alike
				if y0[i] > 0 {
					positive++
				}
			}
			require.Greater(t, positive, len(y0)/4, "the ReLU masks some outputs and keeps others")
			require.Less(t, positive, len(y0))
			require.Equal(t, len(g0), len(g1))
			for k := range g0 {
				require.Equal(t, g0[k], g1[k], "gradient %d", k)
			}
		})
	}
}

// Where there is no fused kernel (float64 here), Conv2dReLU is still one
// op, the ReLU running over the convolution's output, and its gradient
// matches finite differences.
func TestConv2dReLUFallbackGradCheck(t *testing.T) {
	p := ConvParams{Padding: [2]int{1, 1}}
	gradCheck(t, func(xs []*Variable) *Variable { return Conv2dReLU(xs[0], xs[1], xs[2], p) },
		randT(1, 1, 0, 2, 2, 5, 5), randT(2, 0.5, 0, 3, 2, 3, 3), randT(3, 0.5, 0, 3))
	out := Conv2dReLU(Param(randT(1, 1, 0, 2, 2, 5, 5)), Param(randT(2, 1, 0, 3, 2, 3, 3)), nil, p)
	require.Equal(t, "Conv2dReLU", out.creator.Name())
}
