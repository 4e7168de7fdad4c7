package sim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// The host's convolution table entries (tensor/cpu_cnn.go) against sim's
// kernels, entry by entry on the same operands: Im2col and Col2im over a
// batch (row (channel, ki, kj), column (sample, oy, ox)) with stride,
// asymmetric padding and dilation, Swap01, AddChannelBias and SumChannels
// (overwriting, then accumulating).
func TestCNNTableEntriesCPUMatchSim(t *testing.T) {
	d := newDevice(t).Tensors()
	cpu, dev := tensor.CPU().Kernels(), d.Kernels()
	s := &tensor.Conv2dShape{N: 3, C: 4, H: 7, W: 9, O: 6, KH: 3, KW: 2, StrideH: 2, StrideW: 3, PadTop: 1, PadLeft: 2,
		PadBottom: 1, PadRight: 2, DilationH: 2, DilationW: 1, Groups: 2}
	s.OH = (s.H+s.PadTop+s.PadBottom-s.DilationH*(s.KH-1)-1)/s.StrideH + 1
	s.OW = (s.W+s.PadLeft+s.PadRight-s.DilationW*(s.KW-1)-1)/s.StrideW + 1
	rng := tensor.NewRNG(21)
	rows, cols := s.C*s.KH*s.KW, s.N*s.OH*s.OW
	x := tensor.Randn(rng, tensor.Float32, s.N, s.C, s.H, s.W)
	c := tensor.Randn(rng, tensor.Float32, rows, cols)
	// run applies entry f to fresh outputs of the given shapes (filled
	// with init, so that an entry leaving an element unwritten shows) on
	// the host and on sim, and compares them.
	run := func(name string, init float64, shapes [][]int, f func(k *tensor.Kernels, out []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor)) {
		var want, got []*tensor.Tensor
		for _, sh := range shapes {
			o := tensor.Full(tensor.Float32, init, sh...)
			want, got = append(want, o), append(got, o.Clone().MustTo(d))
		}
		f(cpu, want, func(t *tensor.Tensor) *tensor.Tensor { return t })
		f(dev, got, func(t *tensor.Tensor) *tensor.Tensor { return t.MustTo(d) })
		for i := range want {
			requireClose(t, want[i], got[i], 1e-5, "%s: output %d", name, i)
		}
	}
	run("Im2col", 7, [][]int{{rows, cols}}, func(k *tensor.Kernels, o []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor) {
		k.Im2col(o[0], on(x), s)
	})
	run("Col2im", 7, [][]int{{s.N, s.C, s.H, s.W}}, func(k *tensor.Kernels, o []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor) {
		k.Col2im(o[0], on(c), s)
	})
	run("Swap01", 7, [][]int{{cols, rows}}, func(k *tensor.Kernels, o []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor) {
		k.Swap01(o[0], on(c), rows, cols, 1)
	})
	y := tensor.Randn(rng, tensor.Float32, s.N, s.O, s.OH*s.OW)
	bias := tensor.Randn(rng, tensor.Float32, s.O)
	run("AddChannelBias", 0, [][]int{y.Shape()}, func(k *tensor.Kernels, o []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor) {
		require.NoError(t, tensor.Copy(o[0], on(y)))
		k.AddChannelBias(o[0], on(bias), s.N, s.O, s.OH*s.OW)
	})
	run("SumChannels", 5, [][]int{{s.O}, {s.O}}, func(k *tensor.Kernels, o []*tensor.Tensor, on func(*tensor.Tensor) *tensor.Tensor) {
		k.SumChannels(o[0], on(y), s.N, s.O, s.OH*s.OW, false)
		k.SumChannels(o[1], on(y), s.N, s.O, s.OH*s.OW, true)
	})
}

// Conv2dReLU and Conv2dReLUMaxPool2d are one op on sim too (the ReLU over
// the convolution's output, the pooled gradient masked by the pooled
// output and routed by sim's max-pool indices), with the host's values and
// gradients.
func TestConv2dReLUMaxPool2dOnSimMatchesCPU(t *testing.T) {
	d := newDevice(t).Tensors()
	rng := tensor.NewRNG(12)
	x := tensor.Randn(rng, tensor.Float32, 2, 3, 8, 10)
	w := tensor.Randn(rng, tensor.Float32, 4, 3, 3, 3)
	b := tensor.Randn(rng, tensor.Float32, 4)
	cp, pp := autograd.ConvParams{Padding: [2]int{1, 1}}, autograd.PoolParams{Kernel: [2]int{2, 2}}
	run := func(dev tensor.Device, pool bool) (string, []*tensor.Tensor) {
		vs := []*autograd.Variable{autograd.Param(x.MustTo(dev)), autograd.Param(w.MustTo(dev)), autograd.Param(b.MustTo(dev))}
		var out *autograd.Variable
		if pool {
			out = autograd.Conv2dReLUMaxPool2d(vs[0], vs[1], vs[2], cp, pp)
		} else {
			out = autograd.Conv2dReLU(vs[0], vs[1], vs[2], cp)
		}
		dy := tensor.Randn(tensor.NewRNG(13), tensor.Float32, out.Value.Shape()...)
		require.NoError(t, out.BackwardWith(dy.MustTo(dev)))
		res := []*tensor.Tensor{out.Value.MustTo(tensor.CPU())}
		for _, v := range vs {
			res = append(res, v.Grad.MustTo(tensor.CPU()))
		}
		return out.Creator().Name(), res
	}
	for _, pool := range []bool{false, true} {
		wantName, want := run(tensor.CPU(), pool)
		gotName, got := run(d, pool)
		require.Equal(t, wantName, gotName, "pool %v", pool)
		for i := range want {
			requireClose(t, want[i], got[i], 1e-4, "pool %v: output/gradient %d", pool, i)
		}
	}
}
