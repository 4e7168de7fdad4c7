package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// requireClose checks got (on any device) against the host tensor want,
// elementwise within tol relative to the larger of |want| and want's RMS
// (so that the near-zero sums of a gradient are held to the error of its
// typical element, not to their own size).
func requireClose(t *testing.T, want, got *tensor.Tensor, tol float64, msg string, args ...any) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), fmt.Sprintf(msg, args...))
	w, g := want.Contiguous().F32(), got.MustTo(tensor.CPU()).F32()
	var ss float64
	for _, v := range w {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(max(len(w), 1)))
	for i := range w {
		if d := math.Abs(float64(w[i]) - float64(g[i])); d > tol*max(math.Abs(float64(w[i])), rms) || d != d {
			t.Fatalf("%s: element %d of %v: got %v, want %v", fmt.Sprintf(msg, args...), i, want.Shape(), g[i], w[i])
		}
	}
}

// convPass runs Conv2d forward and backward (the loss Σ y·dy) twice on dev,
// the second time accumulating into the first's gradients (the engine then
// offers the Grad buffers), and returns the output and the gradients after
// each pass.
func convPass(dev tensor.Device, x, w, b, dy *tensor.Tensor, p autograd.ConvParams) (y *tensor.Tensor, grads [2][]*tensor.Tensor) {
	vx, vw := autograd.Param(x.Clone().MustTo(dev)), autograd.Param(w.Clone().MustTo(dev))
	vs := []*autograd.Variable{vx, vw}
	var vb *autograd.Variable
	if b != nil {
		vb = autograd.Param(b.Clone().MustTo(dev))
		vs = append(vs, vb)
	}
	for pass := range 2 {
		out := autograd.Conv2d(vx, vw, vb, p)
		y = out.Value.MustTo(tensor.CPU())
		if err := out.BackwardWith(dy.MustTo(dev)); err != nil {
			panic(err)
		}
		for _, v := range vs {
			grads[pass] = append(grads[pass], v.Grad.MustTo(tensor.CPU()).Clone())
		}
	}
	return y, grads
}

// Conv2d on sim against the CPU op: forward and the three gradients, fresh
// and accumulated into Grad, over odd sizes, stride, padding (symmetric and
// torch's asymmetric "same"), dilation, groups, no bias, and a batch big
// enough that the im2col matrix is split into chunks of samples.
func TestConv2dOnSimMatchesCPU(t *testing.T) {
	d := newDevice(t).Tensors()
	cases := []struct {
		name          string
		n, c, h, w, o int
		kh, kw        int
		p             autograd.ConvParams
		bias          bool
	}{
		{"odd/3x3/pad1", 3, 3, 7, 9, 5, 3, 3, autograd.ConvParams{Padding: [2]int{1, 1}}, true},
		{"stride2/5x3/pad(2,1)", 2, 4, 11, 8, 6, 5, 3, autograd.ConvParams{Stride: [2]int{2, 2}, Padding: [2]int{2, 1}}, true},
		{"stride(2,3)/nobias", 3, 2, 9, 13, 4, 3, 2, autograd.ConvParams{Stride: [2]int{2, 3}}, false},
		{"dilation2/pad2", 2, 3, 10, 9, 4, 3, 3, autograd.ConvParams{Dilation: [2]int{2, 2}, Padding: [2]int{2, 2}}, true},
		{"groups2/stride2/dilation(1,2)", 3, 4, 9, 11, 6, 3, 3,
			autograd.ConvParams{Groups: 2, Stride: [2]int{2, 2}, Dilation: [2]int{1, 2}, Padding: [2]int{1, 2}}, true},
		{"groups3/nobias/1x1", 2, 6, 5, 7, 9, 1, 1, autograd.ConvParams{Groups: 3}, false},
		{"same/4x4", 2, 3, 7, 6, 4, 4, 4, autograd.ConvParams{Same: true}, true},
		{"cnn-conv1", 4, 1, 28, 28, 8, 5, 5, autograd.ConvParams{Padding: [2]int{2, 2}}, true},
		// 16*5*5*32*32 = 409600 im2col elements a sample: 40 samples a chunk.
		{"chunks", 41, 16, 32, 32, 3, 5, 5, autograd.ConvParams{Padding: [2]int{2, 2}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := tensor.NewRNG(11)
			g := max(tc.p.Groups, 1)
			x := tensor.Randn(rng, tensor.Float32, tc.n, tc.c, tc.h, tc.w)
			w := tensor.Randn(rng, tensor.Float32, tc.o, tc.c/g, tc.kh, tc.kw)
			var b *tensor.Tensor
			if tc.bias {
				b = tensor.Randn(rng, tensor.Float32, tc.o)
			}
			y0 := autograd.Conv2d(autograd.Const(x), autograd.Const(w), nil, tc.p).Value
			dy := tensor.Randn(rng, tensor.Float32, y0.Shape()...)
			wantY, want := convPass(tensor.CPU(), x, w, b, dy, tc.p)
			gotY, got := convPass(d, x, w, b, dy, tc.p)
			requireClose(t, wantY, gotY, 1e-4, "forward")
			for pass := range 2 {
				for i, name := range []string{"dx", "dw", "db"}[:len(want[pass])] {
					requireClose(t, want[pass][i], got[pass][i], 1e-4, "pass %d: %s", pass, name)
				}
			}
		})
	}
}

// MaxPool2d on sim against the CPU op: output and gradient (routed to the
// CPU's argmax, first on ties) over kernel, stride and padding, with ties
// from a coarse input and overlapping windows that share a maximum.
func TestMaxPool2dOnSimMatchesCPU(t *testing.T) {
	d := newDevice(t).Tensors()
	cases := []struct {
		name       string
		n, c, h, w int
		p          autograd.PoolParams
	}{
		{"2x2", 2, 3, 8, 6, autograd.PoolParams{Kernel: [2]int{2, 2}}},
		{"2x2/odd", 2, 3, 7, 9, autograd.PoolParams{Kernel: [2]int{2, 2}}},
		{"3x3/stride2/pad1", 2, 2, 9, 8, autograd.PoolParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"3x2/stride1/overlap", 1, 3, 6, 7, autograd.PoolParams{Kernel: [2]int{3, 2}, Stride: [2]int{1, 1}, Padding: [2]int{1, 1}}},
		{"4x4/stride(3,2)", 2, 1, 11, 10, autograd.PoolParams{Kernel: [2]int{4, 4}, Stride: [2]int{3, 2}, Padding: [2]int{2, 1}}},
	}
	for _, tc := range cases {
		for _, ties := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ties=%v", tc.name, ties), func(t *testing.T) {
				rng := tensor.NewRNG(5)
				x := tensor.Randn(rng, tensor.Float32, tc.n, tc.c, tc.h, tc.w)
				if ties {
					for i, v := range x.F32() {
						x.F32()[i] = float32(math.Round(float64(v)))
					}
				}
				var ys [2]*tensor.Tensor
				var gs [2]*tensor.Tensor
				var dy *tensor.Tensor
				for i, dev := range []tensor.Device{tensor.CPU(), d} {
					v := autograd.Param(x.Clone().MustTo(dev))
					y := autograd.MaxPool2d(v, tc.p)
					if dy == nil {
						dy = tensor.Randn(rng, tensor.Float32, y.Value.Shape()...)
					}
					require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
					ys[i], gs[i] = y.Value.MustTo(tensor.CPU()), v.Grad.MustTo(tensor.CPU())
				}
				require.Equal(t, ys[0].F32(), ys[1].F32(), "forward")
				requireClose(t, gs[0], gs[1], 1e-6, "backward")
			})
		}
	}
}

// Dropout on sim: the kept fraction is near 1-p, kept elements are scaled
// by 1/(1-p) and the rest are zero, backward applies the same mask, masks
// differ between calls (a seed drawn per call) and repeat from the same
// generator state, and eval mode (and p = 0) is the identity.
func TestDropoutOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	const n = 100003
	x := tensor.AddScalar(tensor.Rand(tensor.NewRNG(2), tensor.Float32, 7, n/7+1), 0.5) // no zeros
	xd := x.MustTo(d)
	for _, p := range []float64{0.1, 0.4, 0.9} {
		t.Run(fmt.Sprintf("p=%v", p), func(t *testing.T) {
			rng := tensor.NewRNG(9)
			v := autograd.Param(xd.Clone())
			y := autograd.Dropout(v, p, rng, true)
			require.Equal(t, "sim:0", y.Value.Device().String())
			ones := tensor.Full(tensor.Float32, 1, x.Shape()...)
			require.NoError(t, y.BackwardWith(ones.MustTo(d)))
			yh, gh := y.Value.MustTo(tensor.CPU()).F32(), v.Grad.MustTo(tensor.CPU()).F32()
			scale := 1 / float32(1-p)
			kept := 0
			for i, xv := range x.F32() {
				switch yh[i] {
				case 0:
					require.Zero(t, gh[i], "element %d dropped forward, not backward", i)
				default:
					kept++
					require.Equal(t, xv*scale, yh[i], "element %d", i)
					require.Equal(t, scale, gh[i], "element %d: backward's mask", i)
				}
			}
			frac := float64(kept) / float64(len(yh))
			// 5 standard deviations of a binomial fraction.
			require.InDelta(t, 1-p, frac, 5*math.Sqrt(p*(1-p)/float64(len(yh))), "kept fraction")

			again := autograd.Dropout(autograd.Const(xd), p, rng, true).Value.MustTo(tensor.CPU()).F32()
			require.NotEqual(t, yh, again, "a second call draws a new mask")
			same := autograd.Dropout(autograd.Const(xd), p, tensor.NewRNG(9), true).Value.MustTo(tensor.CPU()).F32()
			require.Equal(t, yh, same, "the same generator state gives the same mask")
		})
	}
	c := autograd.Const(xd)
	require.Same(t, c, autograd.Dropout(c, 0.4, tensor.NewRNG(1), false), "eval mode is the identity")
	require.Same(t, c, autograd.Dropout(c, 0, tensor.NewRNG(1), true), "p = 0 is the identity")
}

// AvgPool2d (with and without count_include_pad) and AdaptiveAvgPool2d
// (shrinking, with overlapping windows, and growing) on sim against the CPU
// ops: output and gradient.
func TestAvgPool2dOnSimMatchesCPU(t *testing.T) {
	d := newDevice(t).Tensors()
	type tc struct {
		name string
		x    []int
		op   func(*autograd.Variable) *autograd.Variable
	}
	var cases []tc
	for _, incl := range []bool{true, false} {
		for _, p := range []autograd.PoolParams{
			{Kernel: [2]int{2, 2}},
			{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}},
			{Kernel: [2]int{3, 2}, Stride: [2]int{1, 2}, Padding: [2]int{1, 1}},
			{Kernel: [2]int{4, 4}, Stride: [2]int{3, 2}, Padding: [2]int{2, 1}},
		} {
			cases = append(cases, tc{fmt.Sprintf("avg/%v/incl=%v", p, incl), []int{2, 3, 9, 8},
				func(v *autograd.Variable) *autograd.Variable { return autograd.AvgPool2d(v, p, incl) }})
		}
	}
	for _, o := range [][2]int{{1, 1}, {3, 4}, {4, 3}, {7, 5}, {12, 11}} {
		cases = append(cases, tc{fmt.Sprintf("adaptive/%dx%d", o[0], o[1]), []int{2, 3, 7, 8},
			func(v *autograd.Variable) *autograd.Variable { return autograd.AdaptiveAvgPool2d(v, o[0], o[1]) }})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := tensor.NewRNG(6)
			x := tensor.Randn(rng, tensor.Float32, c.x...)
			var ys, gs [2]*tensor.Tensor
			var dy *tensor.Tensor
			for i, dev := range []tensor.Device{tensor.CPU(), d} {
				v := autograd.Param(x.Clone().MustTo(dev))
				y := c.op(v)
				if dy == nil {
					dy = tensor.Randn(rng, tensor.Float32, y.Value.Shape()...)
				}
				require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
				ys[i], gs[i] = y.Value.MustTo(tensor.CPU()), v.Grad.MustTo(tensor.CPU())
			}
			requireClose(t, ys[0], ys[1], 1e-6, "forward")
			requireClose(t, gs[0], gs[1], 1e-6, "backward")
		})
	}
}

// Contiguous on a device is a strided copy: permuted, transposed, narrowed
// and broadcast views come out as on the CPU, and To(CPU) reads a view.
func TestContiguousOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	x := tensor.Randn(tensor.NewRNG(4), tensor.Float32, 3, 5, 7)
	xd := x.MustTo(d)
	views := []struct {
		name string
		f    func(*tensor.Tensor) *tensor.Tensor
	}{
		{"permute", func(t *tensor.Tensor) *tensor.Tensor { return tensor.Permute(t, 2, 0, 1) }},
		{"transpose", func(t *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(t, 0, 2) }},
		{"narrow", func(t *tensor.Tensor) *tensor.Tensor { return tensor.Narrow(tensor.Narrow(t, 1, 1, 3), 2, 2, 4) }},
		{"broadcast", func(t *tensor.Tensor) *tensor.Tensor { return tensor.Expand(tensor.Narrow(t, 1, 2, 1), 3, 4, 7) }},
		{"column", func(t *tensor.Tensor) *tensor.Tensor { return tensor.Narrow(t, 2, 3, 1) }},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			want := v.f(x).Contiguous()
			got := v.f(xd)
			require.False(t, got.IsContiguous())
			c := got.Contiguous()
			require.True(t, c.IsContiguous())
			require.Equal(t, want.F32(), c.MustTo(tensor.CPU()).F32())
			require.Equal(t, want.F32(), got.MustTo(tensor.CPU()).F32(), "To(CPU) of the view")
		})
	}
}
