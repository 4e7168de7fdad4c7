//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

// closeTo checks got (on any device) against the host tensor want,
// elementwise within tol relative to the larger of |want| and want's RMS.
func closeTo(t *testing.T, want, got *tensor.Tensor, tol float64, what string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), what)
	w, g := want.Contiguous().F32(), got.MustTo(tensor.CPU()).F32()
	var ss float64
	for _, v := range w {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(max(len(w), 1)))
	for i := range w {
		if d := math.Abs(float64(w[i]) - float64(g[i])); d > tol*max(math.Abs(float64(w[i])), rms) || d != d {
			t.Fatalf("%s: element %d of %v: got %v, want %v", what, i, want.Shape(), g[i], w[i])
		}
	}
}

// The convnet ops' device paths on the GPU (Conv2d as im2col, cuBLAS and
// col2im with padding, stride, dilation and groups; MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d): a small convnet's output and the gradients of its
// input and parameters match the CPU ops'. Dropout on the GPU draws the
// masks that goddp/cuda/sim draws from the same generator state, and
// Contiguous copies a permuted view as on the CPU.
func TestConvNetOpsMatchCPU(t *testing.T) {
	c := newContext(t)
	dev := c.Tensors()
	rng := tensor.NewRNG(8)
	randn := func(shape ...int) *tensor.Tensor { return tensor.Randn(rng, tensor.Float32, shape...) }
	inputs := []*tensor.Tensor{randn(4, 3, 13, 11), randn(8, 3, 3, 3), randn(8), randn(6, 4, 3, 3), randn(6)}
	run := func(d tensor.Device, dy *tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		vs := make([]*autograd.Variable, len(inputs))
		for i, in := range inputs {
			vs[i] = autograd.Param(in.Clone().MustTo(d))
		}
		h := autograd.ReLU(autograd.Conv2d(vs[0], vs[1], vs[2], autograd.ConvParams{Padding: [2]int{1, 1}}))
		h = autograd.MaxPool2d(h, autograd.PoolParams{Kernel: [2]int{2, 2}}) // [4, 8, 6, 5]
		h = autograd.Conv2d(h, vs[3], vs[4], autograd.ConvParams{Groups: 2, Stride: [2]int{2, 2}, Dilation: [2]int{1, 2}, Padding: [2]int{1, 2}})
		h = autograd.AvgPool2d(h, autograd.PoolParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}}, false)
		y := autograd.AdaptiveAvgPool2d(h, 3, 2)
		if dy == nil {
			return y.Value, nil
		}
		require.NoError(t, y.BackwardWith(dy.MustTo(d)))
		grads := make([]*tensor.Tensor, len(vs))
		for i, v := range vs {
			grads[i] = v.Grad.MustTo(tensor.CPU())
		}
		return y.Value.MustTo(tensor.CPU()), grads
	}
	y0, _ := run(tensor.CPU(), nil)
	dy := randn(y0.Shape()...)
	wantY, want := run(tensor.CPU(), dy)
	gotY, got := run(dev, dy)
	closeTo(t, wantY, gotY, 1e-4, "output")
	for i, name := range []string{"dx", "dw1", "db1", "dw2", "db2"} {
		closeTo(t, want[i], got[i], 1e-4, name)
	}

	s := sim.New(0)
	t.Cleanup(func() { s.Close() })
	x := tensor.AddScalar(tensor.Rand(rng, tensor.Float32, 3, 1001), 0.5)
	masks := make([][]float32, 2)
	for i, d := range []tensor.Device{dev, s.Tensors()} {
		masks[i] = autograd.Dropout(autograd.Const(x.MustTo(d)), 0.4, tensor.NewRNG(21), true).Value.MustTo(tensor.CPU()).F32()
	}
	require.Equal(t, masks[1], masks[0], "dropout on the GPU and on sim from one generator state")

	// Contiguous of a permuted view (the strided copy).
	p := tensor.Permute(inputs[0], 3, 1, 0, 2)
	require.Equal(t, p.Contiguous().F32(), tensor.Permute(inputs[0].MustTo(dev), 3, 1, 0, 2).Contiguous().MustTo(tensor.CPU()).F32())
}

// BatchNorm (training with running statistics, then evaluation),
// SyncBatchNorm's sums path (a world of one: its sums staged through the
// host and back), masked_fill and where on the GPU against the CPU ops:
// outputs, input and parameter gradients, and the running statistics.
func TestNormAndMaskOpsMatchCPU(t *testing.T) {
	c := newContext(t)
	dev := c.Tensors()
	rng := tensor.NewRNG(9)
	randn := func(shape ...int) *tensor.Tensor { return tensor.Randn(rng, tensor.Float32, shape...) }
	x := tensor.AddScalar(randn(6, 5, 9, 7), 2)
	w, b := randn(5), randn(5)
	rm, rv := randn(5), tensor.AddScalar(tensor.Rand(rng, tensor.Float32, 5), 0.5)
	mask := tensor.Triu(tensor.Ones(tensor.Float32, 9, 7), 1)
	cond := tensor.Rand(rng, tensor.Float32, 6, 1, 9, 7)
	var dy *tensor.Tensor
	alone := func([]float64) error { return nil }
	run := func(d tensor.Device, mode string) []*tensor.Tensor {
		xv, wv, bv := autograd.Param(x.Clone().MustTo(d)), autograd.Param(w.Clone().MustTo(d)), autograd.Param(b.Clone().MustTo(d))
		rmd, rvd := rm.Clone().MustTo(d), rv.Clone().MustTo(d)
		var y *autograd.Variable
		switch mode {
		case "train":
			y = autograd.BatchNorm(xv, wv, bv, rmd, rvd, true, 0.1, 1e-5)
		case "eval":
			y = autograd.BatchNorm(xv, wv, bv, rmd, rvd, false, 0.1, 1e-5)
		case "sync":
			y = autograd.SyncBatchNorm(xv, wv, bv, rmd, rvd, 0.1, 1e-5, alone)
		}
		y = autograd.MaskedFill(y, mask, -3)
		y = autograd.Where(tensor.ReLU(tensor.AddScalar(cond, -0.5)), y, autograd.Mul(y, y))
		if dy == nil {
			dy = randn(y.Value.Shape()...)
		}
		require.NoError(t, y.BackwardWith(dy.MustTo(d)))
		out := []*tensor.Tensor{y.Value, xv.Grad, wv.Grad, bv.Grad, rmd, rvd}
		for i := range out {
			out[i] = out[i].MustTo(tensor.CPU())
		}
		return out
	}
	for _, mode := range []string{"train", "eval", "sync"} {
		want, got := run(tensor.CPU(), mode), run(dev, mode)
		for i, name := range []string{"output", "dx", "dw", "db", "running mean", "running variance"} {
			closeTo(t, want[i], got[i], 1e-4, mode+": "+name)
		}
	}
}
