package sim_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// A convnet with BatchNorm2d moves to sim with its buffers (nn.To), trains
// there as on the CPU, and a checkpoint saved from sim resumes on the CPU
// with the CPU run's losses.
func TestBatchNormModelOnSimResumesOnCPU(t *testing.T) {
	d := newDevice(t)
	newModel := func() *nn.Sequential {
		rng := tensor.NewRNG(7)
		return nn.NewSequential(
			nn.NewConv2d(rng, 2, 4, 3, nn.Padding(1)), nn.NewBatchNorm2d(4), nn.NewReLU(), nn.NewMaxPool2d(2),
			nn.NewFlatten(), nn.NewLinear(rng, 4*3*3, 5))
	}
	rng := tensor.NewRNG(8)
	x := tensor.Randn(rng, tensor.Float32, 6, 2, 7, 7)
	labels := []int{0, 4, 1, 3, 2, 2}
	type run struct {
		m   *nn.Sequential
		opt optim.Optimizer
		x   *tensor.Tensor
	}
	newRun := func(dev tensor.Device) run {
		m := newModel()
		require.NoError(t, nn.To(m, dev))
		o, err := optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
		require.NoError(t, err)
		return run{m, o, x.MustTo(dev)}
	}
	step := func(r run) float64 {
		r.opt.ZeroGrad()
		loss := autograd.CrossEntropy(r.m.Forward(autograd.Const(r.x)), labels, autograd.ReductionMean)
		require.NoError(t, loss.Backward())
		require.NoError(t, r.opt.Step())
		return loss.Value.Item()
	}
	cpu, dev := newRun(tensor.CPU()), newRun(d.Tensors())
	bn := dev.m.At(1).(*nn.BatchNorm2d)
	require.Equal(t, "sim:0", bn.RunningMean.Device().String(), "the running statistics moved with the module")
	require.Equal(t, "sim:0", bn.RunningVar.Device().String())
	require.True(t, bn.NumBatchesTracked.IsCPU(), "the int64 counter stays on the host")
	for i := range 4 {
		want, got := step(cpu), step(dev)
		require.InDelta(t, want, got, 1e-5*math.Abs(want), "step %d", i)
	}
	require.EqualValues(t, 4, bn.NumBatchesTracked.Item())
	wantRM := cpu.m.At(1).(*nn.BatchNorm2d).RunningMean.F32()
	gotRM := bn.RunningMean.MustTo(tensor.CPU()).F32()
	for i := range wantRM {
		require.InDelta(t, wantRM[i], gotRM[i], 1e-5*(1+math.Abs(float64(wantRM[i]))), "running mean %d", i)
	}

	path := filepath.Join(t.TempDir(), "bn.safetensors")
	require.NoError(t, checkpoint.Save(path, &checkpoint.Checkpoint{Epoch: 0, Step: 4,
		Model: checkpoint.StateDict(dev.m), Optimizer: (*checkpoint.OptimizerState)(dev.opt.StateDict())}))
	c, err := checkpoint.Load(path)
	require.NoError(t, err)
	resumed := newRun(tensor.CPU())
	require.NoError(t, checkpoint.LoadStateDict(resumed.m, c.Model, true))
	require.NoError(t, resumed.opt.LoadStateDict((*optim.StateDict)(c.Optimizer)))
	require.EqualValues(t, 4, resumed.m.At(1).(*nn.BatchNorm2d).NumBatchesTracked.Item())
	// And back onto sim: the buffers load into the device tensors the
	// module holds.
	back := newRun(d.Tensors())
	require.NoError(t, checkpoint.LoadStateDict(back.m, c.Model, true))
	bnBack := back.m.At(1).(*nn.BatchNorm2d)
	require.Equal(t, "sim:0", bnBack.RunningMean.Device().String())
	require.Equal(t, gotRM, bnBack.RunningMean.MustTo(tensor.CPU()).F32(), "the running mean came back onto sim")
	require.EqualValues(t, 4, bnBack.NumBatchesTracked.Item())
	for i := range 3 {
		want, got := step(cpu), step(resumed)
		require.InDelta(t, want, got, 1e-5*math.Abs(want), "resumed step %d", i)
	}
	// Evaluation mode normalizes with the running statistics on sim too.
	for range 3 {
		step(dev) // dev trails cpu by the resumed steps; bring it level
	}
	nn.Eval(cpu.m)
	nn.Eval(dev.m)
	want := cpu.m.Forward(autograd.Const(x)).Value.F32()
	got := dev.m.Forward(autograd.Const(dev.x)).Value.MustTo(tensor.CPU()).F32()
	close32(t, want, got, 1e-4, "eval output")
}
