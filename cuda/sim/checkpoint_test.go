package sim_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// A model and optimizer on a device are saved from host copies and load
// back onto the device of the model they load into: training resumed from
// the file continues exactly as the uninterrupted run.
func TestDeviceModelSaveLoad(t *testing.T) {
	d := sim.New(0)
	t.Cleanup(func() { _ = d.Close() })
	dev := d.Tensors()
	newRun := func() (nn.Layer, optim.Optimizer) {
		m := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 6, 4), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 4, 3))
		require.NoError(t, nn.To(m, dev))
		o, err := optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		require.NoError(t, err)
		return m, o
	}
	rng := tensor.NewRNG(3)
	x := tensor.Randn(rng, tensor.Float32, 5, 6).MustTo(dev)
	labels := []int{0, 2, 1, 1, 0}
	step := func(m nn.Layer, o optim.Optimizer) float64 {
		o.ZeroGrad()
		loss := autograd.CrossEntropy(m.Forward(autograd.Const(x)), labels, autograd.ReductionMean)
		require.NoError(t, loss.Backward())
		require.NoError(t, o.Step())
		return loss.Value.Item()
	}
	m, o := newRun()
	step(m, o)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, checkpoint.Save(path, &checkpoint.Checkpoint{Epoch: 0, Step: 1,
		Model: checkpoint.StateDict(m), Optimizer: (*checkpoint.OptimizerState)(o.StateDict())}))

	c, err := checkpoint.Load(path)
	require.NoError(t, err)
	for k, v := range c.Model {
		require.True(t, v.IsCPU(), "%s is read into host memory", k)
	}
	m2, o2 := newRun()
	require.NoError(t, checkpoint.LoadStateDict(m2, c.Model, true))
	require.NoError(t, o2.LoadStateDict((*optim.StateDict)(c.Optimizer)))
	for i, p := range nn.Parameters(m2) {
		require.Equal(t, "sim:0", p.Value.Device().String(), "parameter %d loads onto the model's device", i)
		require.Equal(t, nn.Parameters(m)[i].Value.MustTo(tensor.CPU()).F32(), p.Value.MustTo(tensor.CPU()).F32())
	}
	for range 3 {
		require.Equal(t, step(m, o), step(m2, o2), "the momentum buffers came back too, on the device")
	}
}
