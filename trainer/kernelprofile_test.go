package trainer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// A KernelProfile covers exactly the steps samples_per_s measures: for
// Linear(4, 1) at batch 8, each step is one forward product (8x1x4) and one
// weight-gradient product (1x4x8), 2·32 FLOPs each; two epochs of 8 steps,
// less the first epoch's 3 warm-up steps, make 13 measured steps.
func TestKernelReportCountsTheMeasuredSteps(t *testing.T) {
	ctx := context.Background()
	pg := commtest.NewGroups(1, commtest.WithTimeout(time.Minute))[0]
	cfg := tutorialJob(t, ctx, pg, 0)
	cfg.Loss = mse
	noProfile, err := New(ctx, cfg)
	require.NoError(t, err)
	_, err = noProfile.KernelReport(ctx)
	require.ErrorContains(t, err, "KernelProfile is nil")
	noProfile.Close()

	cfg.KernelProfile = tensor.NewKernelProfile()
	tr, err := New(ctx, cfg)
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

// A Train that fails mid-epoch leaves its profile recording until Close,
// which frees the process's recorder for the next profile.
func TestCloseStopsTheKernelProfile(t *testing.T) {
	ctx := context.Background()
	pg := commtest.NewGroups(1, commtest.WithTimeout(time.Minute))[0]
	cfg := tutorialJob(t, ctx, pg, 0)
	steps := 0
	cfg.Loss = func(out *autograd.Variable, b data.Batch) *autograd.Variable {
		if steps++; steps > 5 { // past the warm-up: the profile records
			return out // not a scalar: the step fails
		}
		return mse(out, b)
	}
	cfg.KernelProfile = tensor.NewKernelProfile()
	tr, err := New(ctx, cfg)
	require.NoError(t, err)
	require.ErrorContains(t, tr.Train(ctx, 1), "want a scalar")
	_, err = tensor.NewKernelProfile().Start()
	require.ErrorIs(t, err, tensor.ErrProfiling, "the failed Train's profile still records")
	require.NoError(t, tr.Close())
	stop, err := tensor.NewKernelProfile().Start()
	require.NoError(t, err)
	stop()
}
