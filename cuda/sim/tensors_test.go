package sim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// The tensor layer's device: To and back, Item, creation, and the errors of
// mixed devices and of ops without a device kernel.
func TestTensorDevice(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	require.Same(t, dev, d.Tensors(), "one tensor.Device per device: tensors compare devices by identity")
	require.Equal(t, "sim:0", dev.String())

	rng := tensor.NewRNG(1)
	x := tensor.Randn(rng, tensor.Float32, 3, 5)
	xd, err := x.To(dev)
	require.NoError(t, err)
	require.Equal(t, "sim:0", xd.Device().String())
	require.False(t, xd.IsCPU())
	require.True(t, x.IsCPU())
	require.Equal(t, "cpu", x.Device().String())
	back, err := xd.To(tensor.CPU())
	require.NoError(t, err)
	require.Equal(t, x.F32(), back.F32())
	require.Same(t, xd, xd.MustTo(dev), "To the same device is the tensor itself")

	require.Equal(t, float64(x.At(1, 2)), tensor.Narrow(tensor.Narrow(xd, 0, 1, 1).Reshape(5), 0, 2, 1).Item(),
		"a contiguous view reads through its offset")
	z, err := tensor.ZerosOn(dev, tensor.Float32, 4)
	require.NoError(t, err)
	tensor.Fill(z, 2.5)
	require.Equal(t, []float32{2.5, 2.5, 2.5, 2.5}, z.MustTo(tensor.CPU()).F32())
	_, err = tensor.ZerosOn(dev, tensor.Float64, 4)
	require.ErrorContains(t, err, "sim:0 holds float32 tensors, not float64")
	c := xd.Clone()
	tensor.Fill(xd, 0)
	require.Equal(t, x.F32(), c.MustTo(tensor.CPU()).F32(), "Clone copies on the device")

	require.PanicsWithValue(t, "tensor: F32 on a tensor on sim:0: its elements are in device memory (an op without a kernel on sim:0?); copy it to the host with To(tensor.CPU())",
		func() { xd.F32() })

	w := autograd.Param(tensor.Randn(rng, tensor.Float32, 4, 5))
	require.PanicsWithValue(t, "tensor: Linear: operands on sim:0 and cpu",
		func() { autograd.Linear(autograd.Const(xd), w, nil) })

	img, err := tensor.Randn(rng, tensor.Float32, 2, 2, 5, 5).To(dev)
	require.NoError(t, err)
	require.PanicsWithValue(t, "Pow has no kernel on sim:0; copy its operands to the host with To(tensor.CPU())",
		func() { autograd.Pow(autograd.Const(img), autograd.Const(img)) })
}

type trainCase struct {
	name  string
	opt   func([]*autograd.Variable) optim.Optimizer
	loss  func(out *autograd.Variable, yHost, y *tensor.Tensor, labels []int) *autograd.Variable
	model func(rng *tensor.RNG) nn.Layer
}

// Training on sim matches training on the CPU step for step: the same
// model, data and optimizer, every op of the step (Linear, ReLU, Add,
// LogSoftmax, cross-entropy, MSE, sums, SGD with and without momentum,
// AdamW, zero_grad, gradient accumulation over two backward passes) through
// the device's kernels.
func TestTrainOnSimMatchesCPU(t *testing.T) {
	mlp := func(rng *tensor.RNG) nn.Layer {
		return nn.NewSequential(nn.NewLinear(rng, 13, 17), nn.NewReLU(), nn.NewLinear(rng, 17, 5))
	}
	sgd := func(cfg optim.SGDConfig) func([]*autograd.Variable) optim.Optimizer {
		return func(ps []*autograd.Variable) optim.Optimizer {
			o, err := optim.NewSGD(ps, cfg)
			require.NoError(t, err)
			return o
		}
	}
	ce := func(out *autograd.Variable, _, _ *tensor.Tensor, labels []int) *autograd.Variable {
		return autograd.CrossEntropy(out, labels, autograd.ReductionMean)
	}
	cases := []trainCase{
		{"mlp/sgd/cross-entropy", sgd(optim.SGDConfig{LR: 0.1}), ce, mlp},
		{"mlp/sgd-momentum-wd/cross-entropy", sgd(optim.SGDConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3}), ce, mlp},
		{"mlp/adamw/log-softmax+mse+sum", func(ps []*autograd.Variable) optim.Optimizer {
			o, err := optim.NewAdamW(ps, optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2})
			require.NoError(t, err)
			return o
		}, func(out *autograd.Variable, _, y *tensor.Tensor, _ []int) *autograd.Variable {
			ls := autograd.LogSoftmax(out, -1)
			return autograd.Add(autograd.MSELoss(ls, autograd.Const(y), autograd.ReductionMean),
				autograd.MeanAll(autograd.Add(ls, autograd.Const(tensor.Narrow(y, 0, 0, 1).Reshape(5)))))
		}, mlp},
		{"linear/sgd/mse", sgd(optim.SGDConfig{LR: 1e-2}), func(out *autograd.Variable, yHost, _ *tensor.Tensor, _ []int) *autograd.Variable {
			target := tensor.Narrow(yHost, 1, 0, 1).Contiguous().MustTo(out.Value.Device())
			return autograd.MSELoss(out, autograd.Const(target), autograd.ReductionSum)
		}, func(rng *tensor.RNG) nn.Layer { return nn.NewLinear(rng, 13, 1) }},
	}
	d := newDevice(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var losses [2][]float64
			var params [2][][]float32
			for run, dev := range []tensor.Device{tensor.CPU(), d.Tensors()} {
				rng := tensor.NewRNG(3)
				model := tc.model(rng)
				require.NoError(t, nn.To(model, dev))
				opt := tc.opt(nn.Parameters(model))
				for step := 0; step < 6; step++ {
					x := tensor.Randn(rng, tensor.Float32, 11, 13)
					y := tensor.Rand(rng, tensor.Float32, 11, 5)
					labels := make([]int, 11)
					for i := range labels {
						labels[i] = rng.IntN(5)
					}
					opt.ZeroGrad()
					// Two backward passes accumulate into the gradients.
					total := 0.0
					for half := 0; half < 2; half++ {
						xs, ys := tensor.Narrow(x, 0, half*5, 5+half).Contiguous(), tensor.Narrow(y, 0, half*5, 5+half).Contiguous()
						loss := tc.loss(model.Forward(autograd.Const(xs.MustTo(dev))), ys, ys.MustTo(dev), labels[half*5:half*5+5+half])
						total += loss.Value.Item()
						require.NoError(t, loss.Backward())
					}
					losses[run] = append(losses[run], total)
					require.NoError(t, opt.Step())
				}
				for _, p := range nn.Parameters(model) {
					require.Equal(t, dev.String(), p.Value.Device().String())
					params[run] = append(params[run], p.Value.MustTo(tensor.CPU()).F32())
				}
			}
			for i := range losses[0] {
				require.InEpsilon(t, losses[0][i], losses[1][i], 1e-5, "step %d: cpu %v, sim %v", i, losses[0], losses[1])
			}
			for i := range params[0] {
				for j := range params[0][i] {
					require.InDelta(t, params[0][i][j], params[1][i][j], 1e-5*(1+math.Abs(float64(params[0][i][j]))), "parameter %d[%d]", i, j)
				}
			}
		})
	}
}

// Gradient clipping on the device: the norm and the clipped gradients of
// the CPU's ClipGradNorm, computed without leaving the device.
func TestClipGradNormOnSim(t *testing.T) {
	d := newDevice(t)
	rng := tensor.NewRNG(4)
	for _, maxNorm := range []float64{0.5, 1e3} {
		var host, dev []*autograd.Variable
		for _, shape := range [][]int{{7, 130}, {1}, {1027}} {
			g := tensor.Randn(rng, tensor.Float32, shape...)
			hp := autograd.Param(tensor.New(tensor.Float32, shape...))
			hp.Grad = g.Clone()
			dp := autograd.Param(tensor.New(tensor.Float32, shape...).MustTo(d.Tensors()))
			dp.Grad = g.MustTo(d.Tensors())
			host, dev = append(host, hp), append(dev, dp)
		}
		want := optim.ClipGradNorm(host, maxNorm)
		got := optim.ClipGradNorm(dev, maxNorm)
		require.InEpsilon(t, want, got, 1e-5, "max norm %v", maxNorm)
		for i := range host {
			w, g := host[i].Grad.F32(), dev[i].Grad.MustTo(tensor.CPU()).F32()
			for j := range w {
				require.InDelta(t, w[j], g[j], 1e-6*(1+math.Abs(float64(w[j]))), "max norm %v, gradient %d[%d]", maxNorm, i, j)
			}
		}
	}
}
