package autograd

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// convParamsOf reads a fixture case's conv arguments.
func convParamsOf(c *fixCase) ConvParams {
	s, p, d := c.ints("stride"), c.ints("padding"), c.ints("dilation")
	cp := ConvParams{Stride: [2]int{s[0], s[1]}, Padding: [2]int{p[0], p[1]}, Dilation: [2]int{d[0], d[1]}, Groups: c.int("groups")}
	if c.has("same") {
		cp.Same = c.bool("same")
	}
	return cp
}

func TestConv2dFixture(t *testing.T) {
	for _, threads := range []int{1, 2} {
		prev := tensor.Threads()
		tensor.SetThreads(threads)
		runFixture(t, "conv2d", plain(func(c *fixCase, in []*Variable) *Variable {
			var b *Variable
			if len(in) == 3 {
				b = in[2]
			}
			return Conv2d(in[0], in[1], b, convParamsOf(c))
		}))
		tensor.SetThreads(prev)
	}
}

func TestConv2dGradCheck(t *testing.T) {
	cases := []struct {
		name   string
		x, w   []int
		bias   bool
		params ConvParams
	}{
		{"basic", []int{2, 2, 5, 4}, []int{3, 2, 3, 3}, true, ConvParams{}},
		{"stride_pad", []int{1, 2, 6, 5}, []int{2, 2, 3, 2}, true, ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}}},
		{"dilation", []int{1, 1, 7, 6}, []int{2, 1, 2, 3}, false, ConvParams{Dilation: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"groups", []int{2, 4, 4, 4}, []int{2, 2, 3, 3}, true, ConvParams{Groups: 2, Padding: [2]int{1, 1}}},
		{"depthwise", []int{1, 3, 5, 5}, []int{3, 1, 3, 3}, true, ConvParams{Groups: 3, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"same_even", []int{1, 2, 4, 5}, []int{2, 2, 2, 4}, true, ConvParams{Same: true}},
		{"pointwise", []int{2, 3, 3, 2}, []int{2, 3, 1, 1}, true, ConvParams{}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(100 + 3*i)
			inputs := []*tensor.Tensor{randT(seed, 1, 0, tc.x...), randT(seed+1, 0.5, 0, tc.w...)}
			if tc.bias {
				inputs = append(inputs, randT(seed+2, 0.5, 0, tc.w[0]))
			}
			gradCheck(t, func(xs []*Variable) *Variable {
				var b *Variable
				if len(xs) == 3 {
					b = xs[2]
				}
				return Conv2d(xs[0], xs[1], b, tc.params)
			}, inputs...)
		})
	}
}

// TestConv2dAccumulatesIntoGrad checks the gradAccumulator path: a second
// backward adds into the weight's existing Grad rather than replacing it.
func TestConv2dAccumulatesIntoGrad(t *testing.T) {
	x := Const(randT(1, 1, 0, 2, 2, 5, 5))
	w, b := Param(randT(2, 1, 0, 3, 2, 3, 3)), Param(randT(3, 1, 0, 3))
	run := func() { require.NoError(t, SumAll(Conv2d(x, w, b, ConvParams{Padding: [2]int{1, 1}})).Backward()) }
	run()
	once := append([]float64(nil), w.Grad.F64()...)
	onceB := append([]float64(nil), b.Grad.F64()...)
	run()
	for i, v := range w.Grad.F64() {
		require.InDelta(t, 2*once[i], v, 1e-9)
	}
	for i, v := range b.Grad.F64() {
		require.InDelta(t, 2*onceB[i], v, 1e-9)
	}
}

func TestConv2dBadShapesPanic(t *testing.T) {
	x := Const(tensor.New(tensor.Float32, 1, 4, 5, 5))
	require.Panics(t, func() { Conv2d(x, Const(tensor.New(tensor.Float32, 2, 3, 3, 3)), nil, ConvParams{}) }, "channels")
	require.Panics(t, func() { Conv2d(x, Const(tensor.New(tensor.Float32, 3, 2, 3, 3)), nil, ConvParams{Groups: 2}) }, "out not divisible")
	require.Panics(t, func() { Conv2d(x, Const(tensor.New(tensor.Float32, 2, 4, 7, 7)), nil, ConvParams{}) }, "kernel too big")
	require.Panics(t, func() {
		Conv2d(x, Const(tensor.New(tensor.Float32, 2, 4, 3, 3)), nil, ConvParams{Same: true, Stride: [2]int{2, 2}})
	}, "same with stride")
	require.Panics(t, func() {
		Conv2d(Const(tensor.New(tensor.Float32, 4, 5, 5)), Const(tensor.New(tensor.Float32, 2, 4, 3, 3)), nil, ConvParams{})
	})
}

// TestConv2dEngineMatchesIm2col runs float32 convolutions, which take the
// engine's kernels (oneDNN's primitives) where the build has them, against
// the float64 im2col path, forward and every gradient, at one and two
// threads (two splits the batch). With oneDNN built in, each case must
// really run on it: Conv2dKernel names the implementation.
func TestConv2dEngineMatchesIm2col(t *testing.T) {
	cases := []struct {
		name   string
		x, w   []int
		bias   bool
		params ConvParams
	}{
		{"convnet1", []int{5, 1, 28, 28}, []int{32, 1, 5, 5}, true, ConvParams{Padding: [2]int{2, 2}}},
		{"convnet2", []int{3, 32, 14, 14}, []int{64, 32, 5, 5}, true, ConvParams{Padding: [2]int{2, 2}}},
		{"basic", []int{2, 2, 5, 4}, []int{3, 2, 3, 3}, true, ConvParams{}},
		{"stride_pad", []int{3, 2, 6, 5}, []int{2, 2, 3, 2}, true, ConvParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 2}}},
		{"dilation", []int{2, 1, 7, 6}, []int{2, 1, 2, 3}, false, ConvParams{Dilation: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"groups", []int{2, 4, 4, 4}, []int{2, 2, 3, 3}, true, ConvParams{Groups: 2, Padding: [2]int{1, 1}}},
		{"depthwise", []int{3, 16, 9, 9}, []int{16, 1, 3, 3}, true, ConvParams{Groups: 16, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"same_even", []int{2, 2, 4, 5}, []int{2, 2, 2, 4}, true, ConvParams{Same: true}},
		{"pointwise", []int{2, 24, 3, 2}, []int{40, 24, 1, 1}, false, ConvParams{}},
		// 37 samples: past two of the host's 16-sample engine chunks.
		{"chunks", []int{37, 3, 6, 6}, []int{4, 3, 3, 3}, true, ConvParams{Padding: [2]int{1, 1}}},
		{"odd_strided", []int{3, 5, 11, 13}, []int{7, 5, 3, 5}, true, ConvParams{Stride: [2]int{3, 2}, Padding: [2]int{2, 1}, Dilation: [2]int{1, 2}}},
	}
	withDNNL := strings.Contains(tensor.BLASName(), "onednn")
	for i, tc := range cases {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads=%d", tc.name, threads), func(t *testing.T) {
				prev := tensor.Threads()
				tensor.SetThreads(threads)
				defer tensor.SetThreads(prev)
				seed := uint64(300 + 5*i)
				in64 := []*tensor.Tensor{randT(seed, 1, 0, tc.x...), randT(seed+1, 0.3, 0, tc.w...)}
				if tc.bias {
					in64 = append(in64, randT(seed+2, 0.5, 0, tc.w[0]))
				}
				gy64 := randT(seed+3, 1, 0, Conv2d(Const(in64[0]), Const(in64[1]), nil, tc.params).Value.Shape()...)
				run := func(dt tensor.DType) (*tensor.Tensor, []*Variable) {
					vs := make([]*Variable, len(in64))
					for k, v := range in64 {
						vs[k] = Param(tensor.AsType(v, dt))
					}
					var b *Variable
					if tc.bias {
						b = vs[2]
					}
					y := Conv2d(vs[0], vs[1], b, tc.params)
					require.NoError(t, y.BackwardWith(tensor.AsType(gy64, dt)))
					return y.Value, vs
				}
				y32, v32 := run(tensor.Float32)
				y64, v64 := run(tensor.Float64)
				closeTo := func(what string, want, got *tensor.Tensor) {
					w, g := want.F64(), tensor.AsType(got, tensor.Float64).F64()
					require.Equal(t, len(w), len(g), what)
					for j := range w {
						require.InDelta(t, w[j], g[j], 1e-4+1e-4*math.Abs(w[j]), "%s[%d]", what, j)
					}
				}
				closeTo("y", y64, y32)
				for k := range v64 {
					closeTo(fmt.Sprintf("grad %d", k), v64[k].Grad, v32[k].Grad)
				}
				if withDNNL {
					g := newConvGeom(tc.x, tc.w, tc.params)
					s := g.engineShape(g.n)
					for _, op := range []string{"fwd", "bwd_data", "bwd_weights"} {
						k := tensor.Conv2dKernel(&s, op, tc.bias && op != "bwd_data")
						require.NotEmpty(t, k, "oneDNN has no %s kernel", op)
						t.Logf("%s: %s", op, k)
					}
				}
			})
		}
	}
}
