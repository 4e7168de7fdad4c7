package sim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

// GELU's tanh approximation on the device (kernels.cu's gelu_tanh_*, float32
// arithmetic) against the host's kernel (float64 lanes): the output and
// the gradient through autograd.GELUTanh, whose device keeps the
// derivative (GELUTanhWithGrad) and multiplies it in the backward.
func TestGELUTanhOnSim(t *testing.T) {
	rng := tensor.NewRNG(3)
	for _, n := range sizes {
		x := tensor.MulScalar(tensor.Randn(rng, tensor.Float32, n), 4)
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.GELUTanh(xs[0]) }, 1e-6, x)
	}
}

// BackwardAndFree on the device writes the gradient over the kept
// derivative: the gradient of the sum is the host's derivative.
func TestGELUTanhFreeingBackwardOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	x := tensor.MulScalar(tensor.Randn(tensor.NewRNG(4), tensor.Float32, 300), 4)
	host := autograd.Param(x)
	require.NoError(t, autograd.SumAll(autograd.GELUTanh(host)).BackwardAndFree())
	dev := autograd.Param(x.Clone().MustTo(d))
	require.NoError(t, autograd.SumAll(autograd.GELUTanh(dev)).BackwardAndFree())
	close32(t, host.Grad.F32(), dev.Grad.MustTo(tensor.CPU()).F32(), 1e-6, "gradient")
}

// The three kernels under every launch shape against the host's table,
// with the ends: ±0 keep their sign, ±Inf give the limits (+Inf and -0;
// derivative 1 and -0), NaN stays NaN; the backward may write over dy.
func TestGELUTanhKernelsAnyLaunch(t *testing.T) {
	inf := float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	ends := []float32{0, negZero, inf, -inf, 30, -30, float32(math.NaN())}
	endY := []float32{0, negZero, inf, negZero, 30, negZero}
	endD := []float32{0.5, 0.5, 1, negZero, 1, negZero}
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		const n = 1027
		x := tensor.MulScalar(e.randn(n), 4)
		x.F32()[3], x.F32()[4] = 1e-30, -1e-30
		copy(x.F32()[n-len(ends):], ends)
		dy := e.randn(n)
		wantY, wantD := tensor.GELUTanhWithGrad(x)
		wantG := tensor.GELUTanhBackward(dy, x)
		xb := e.up(x.F32())
		y, d, y1 := e.zeros(n), e.zeros(n), e.zeros(n)
		e.launch("gelu_tanh_with_grad_f32", grid, block, sim.Ptr(y), sim.Ptr(d), sim.Ptr(xb), sim.I64(n))
		e.launch("gelu_tanh_f32", grid, block, sim.Ptr(y1), sim.Ptr(xb), sim.I64(n))
		g := e.up(dy.F32())
		e.launch("gelu_tanh_bwd_f32", grid, block, sim.Ptr(g), sim.Ptr(g), sim.Ptr(xb), sim.I64(n))
		for _, c := range []struct {
			name      string
			want, got []float32
			wantEnds  []float32
		}{
			{"value", wantY.F32(), y.F32(), endY},
			{"value alone", wantY.F32(), y1.F32(), endY},
			{"derivative", wantD.F32(), d.F32(), endD},
			{"backward", wantG.F32(), g.F32(), nil},
		} {
			body := n - len(ends)
			close32(t, c.want[:body], c.got[:body], 1e-6, c.name)
			got := c.got[body:]
			if c.wantEnds != nil {
				for i, w := range c.wantEnds {
					require.Equal(t, math.Float32bits(w), math.Float32bits(got[i]), "%s at %v: %v", c.name, ends[i], got[i])
				}
			}
			require.True(t, got[len(ends)-1] != got[len(ends)-1], "%s of NaN: %v", c.name, got[len(ends)-1])
		}
	})
}
