package nn

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// TestTrainStepGarbageIndependentOfParams checks the bar that a steady-state
// training step allocates nothing that grows with the parameter count: with a
// wide model and a one-sample batch, a step's garbage must stay far below the
// size of the parameters (gradients are accumulated into existing buffers and
// SGD updates in place).
func TestTrainStepGarbageIndependentOfParams(t *testing.T) {
	rng := tensor.NewRNG(0)
	model := NewSequential(NewLinear(rng, 512, 512), NewReLU(), NewLinear(rng, 512, 512))
	x := autograd.Const(tensor.Rand(rng, tensor.Float32, 1, 512))
	y := autograd.Const(tensor.Rand(rng, tensor.Float32, 1, 512))
	opt, err := optim.NewSGD(Parameters(model), optim.SGDConfig{LR: 1e-3, Momentum: 0.9})
	require.NoError(t, err)
	var lossFn MSELoss
	step := func() {
		opt.ZeroGrad()
		require.NoError(t, lossFn.Forward(model.Forward(x), y).Backward())
		require.NoError(t, opt.Step())
	}
	for i := 0; i < 3; i++ {
		step()
	}
	const steps = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < steps; i++ {
		step()
	}
	runtime.ReadMemStats(&after)
	perStep := float64(after.TotalAlloc-before.TotalAlloc) / steps
	paramBytes, largest := 0, 0
	for _, p := range Parameters(model) {
		paramBytes += 4 * p.Value.Numel()
		largest = max(largest, 4*p.Value.Numel())
	}
	t.Logf("%.0f B allocated per step, parameters %d B", perStep, paramBytes)
	// One weight-sized temporary (a fresh dW) would be 1 MiB here; the
	// activations of a one-sample batch are a few KiB. The pure-Go GEMM
	// engine (CGO_ENABLED=0) adds some tens of KiB of its own.
	require.Less(t, perStep, float64(largest)/4, "a step allocates parameter-sized garbage")
}
