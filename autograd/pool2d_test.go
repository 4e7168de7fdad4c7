package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func poolParamsOf(c *fixCase) PoolParams {
	k, s, p := c.ints("kernel"), c.ints("stride"), c.ints("padding")
	return PoolParams{Kernel: [2]int{k[0], k[1]}, Stride: [2]int{s[0], s[1]}, Padding: [2]int{p[0], p[1]}}
}

func TestMaxPool2dFixture(t *testing.T) {
	runFixture(t, "max_pool2d", plain(func(c *fixCase, in []*Variable) *Variable { return MaxPool2d(in[0], poolParamsOf(c)) }))
}

func TestAvgPool2dFixture(t *testing.T) {
	runFixture(t, "avg_pool2d", plain(func(c *fixCase, in []*Variable) *Variable {
		return AvgPool2d(in[0], poolParamsOf(c), c.bool("count_include_pad"))
	}))
}

func TestAdaptiveAvgPool2dFixture(t *testing.T) {
	runFixture(t, "adaptive_avg_pool2d", plain(func(c *fixCase, in []*Variable) *Variable {
		o := c.ints("output")
		return AdaptiveAvgPool2d(in[0], o[0], o[1])
	}))
}

func TestPool2dGradCheck(t *testing.T) {
	// Distinct, well-separated values keep MaxPool away from ties (its kink).
	spread := func(seed uint64, shape ...int) *tensor.Tensor {
		x := randT(seed, 1, 0, shape...)
		d := x.F64()
		perm := tensor.NewRNG(seed).Perm(len(d))
		for i := range d {
			d[i] = float64(perm[i])*0.1 + 0.01*d[i]
		}
		return x
	}
	k3s2p1 := PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}
	t.Run("max_k2", func(t *testing.T) {
		gradCheck(t, func(xs []*Variable) *Variable { return MaxPool2d(xs[0], PoolParams{Kernel: [2]int{2, 2}}) }, spread(1, 2, 2, 5, 4))
	})
	t.Run("max_k3s2p1", func(t *testing.T) {
		gradCheck(t, func(xs []*Variable) *Variable { return MaxPool2d(xs[0], k3s2p1) }, spread(2, 1, 2, 7, 6))
	})
	for _, incl := range []bool{true, false} {
		gradCheck(t, func(xs []*Variable) *Variable { return AvgPool2d(xs[0], k3s2p1, incl) }, randT(3, 1, 0, 2, 2, 7, 6))
		gradCheck(t, func(xs []*Variable) *Variable {
			return AvgPool2d(xs[0], PoolParams{Kernel: [2]int{2, 3}, Stride: [2]int{1, 2}, Padding: [2]int{1, 1}}, incl)
		}, randT(4, 1, 0, 1, 2, 5, 6))
	}
	gradCheck(t, func(xs []*Variable) *Variable { return AdaptiveAvgPool2d(xs[0], 3, 2) }, randT(5, 1, 0, 2, 2, 7, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return AdaptiveAvgPool2d(xs[0], 4, 5) }, randT(6, 1, 0, 1, 2, 3, 3))
}

func TestPool2dBadParamsPanic(t *testing.T) {
	x := Const(tensor.New(tensor.Float32, 1, 1, 4, 4))
	require.Panics(t, func() { MaxPool2d(x, PoolParams{Kernel: [2]int{2, 2}, Padding: [2]int{2, 2}}) }, "padding > kernel/2")
	require.Panics(t, func() { AvgPool2d(x, PoolParams{Kernel: [2]int{5, 5}}, true) }, "kernel larger than input")
	require.Panics(t, func() { MaxPool2d(Const(tensor.New(tensor.Float32, 4, 4)), PoolParams{Kernel: [2]int{2, 2}}) }, "not 4-d")
	require.Panics(t, func() { AdaptiveAvgPool2d(x, 0, 2) })
}

// MaxPool2d keeps its indices as torch's max_pool2d_with_indices returns
// them: an int64 tensor [N, C, OH, OW] of offsets in each [H, W] plane,
// for the 2x2 fast path and the general window alike.
func TestMaxPool2dIndicesInt64(t *testing.T) {
	x := tensor.FromF32([]float32{
		1, 5, 2, 0,
		3, 4, 8, 7,
		9, 0, 1, 6,
		2, 2, 3, 3,
	}, 1, 1, 4, 4)
	for _, c := range []struct {
		p    PoolParams
		want []int64
	}{
		{PoolParams{Kernel: [2]int{2, 2}}, []int64{1, 6, 8, 11}},
		{PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}}, []int64{8, 6, 8, 6}},
	} {
		y := MaxPool2d(NewVariable(x, true), c.p)
		op, ok := y.creator.(*maxPool2dOp)
		require.True(t, ok)
		require.Equal(t, tensor.Int64, op.idx.DType(), "%+v", c.p)
		require.Equal(t, y.Value.Shape(), op.idx.Shape(), "%+v", c.p)
		require.Equal(t, c.want, op.idx.I64(), "%+v", c.p)
	}
}
