package trainer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// A KernelProfile covers exactly the steps samples_per_s measures: for
// Linear(4, 1) at batch 8, each step is one forward product (8x1x4) and one
// weight-gradient product (1x4x8), 2·32 FLOPs each; two epochs of 8 steps,
// less the first epoch's 3 warm-up steps, make 13 measured steps.
func TestKernelReportCountsTheMeasuredSteps(t *testing.T) {
	ctx := context.Background()
	pg := commtest.NewGroups(1, commtest.WithTimeout(time.Minute))[0]
	rng := tensor.NewRNG(1)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 64, 4), tensor.Rand(rng, tensor.Float32, 64, 1))
	require.NoError(t, err)
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
	require.NoError(t, err)
	loader, err := data.NewDataLoader(ds, data.BatchSize(8), data.WithSampler(sampler))
	require.NoError(t, err)
	model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 4, 1), pg)
	require.NoError(t, err)
	defer model.Close()
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)

	noProfile, err := New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: 8, Loss: mse})
	require.NoError(t, err)
	_, err = noProfile.KernelReport(ctx)
	require.ErrorContains(t, err, "KernelProfile is nil")
	noProfile.Close()

	tr, err := New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: 8, Loss: mse,
		KernelProfile: tensor.NewKernelProfile()})
	require.NoError(t, err)
	defer tr.Close()
	require.NoError(t, tr.Train(ctx, 2))
	r, err := tr.KernelReport(ctx)
	require.NoError(t, err)

	const steps, flopsPerStep = 13, 2 * 2 * 8 * 4
	require.Equal(t, 1, r.Ranks)
	require.Equal(t, float64(steps*flopsPerStep), r.KernelFLOPs)
	shapes := map[string]int64{}
	for _, s := range r.Kernels {
		shapes[s.Kernel+" "+s.Shape] = s.Calls
	}
	require.Equal(t, map[string]int64{"sgemm 8x1x4 NT": steps, "sgemm 1x4x8 TN": steps}, shapes)
	require.Positive(t, r.KernelTime)
	require.Less(t, r.KernelTime, r.Measured, "the kernels are part of the measured steps")
	require.Greater(t, r.KernelFraction(), 0.0)
	require.Less(t, r.KernelFraction(), 1.0)
	require.Positive(t, r.KernelGFLOPS())
	require.Greater(t, r.KernelGFLOPS(), r.StepGFLOPS(), "the kernels alone run faster than the steps")
}
