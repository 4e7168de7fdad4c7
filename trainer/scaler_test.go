package trainer

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// overflowing is mse with overflows injected: a batch whose first target
// is below 0.15 has its loss multiplied by 1e38, so the scaled loss, and
// its gradients, are infinite. Which steps overflow depends on the data
// only, so an interrupted run and an uninterrupted one inject the same.
var overflowing LossFunc = func(out *autograd.Variable, b data.Batch) *autograd.Variable {
	l := mse(out, b)
	if b.Targets.Contiguous().F32()[0] < 0.15 {
		k := tensor.ZerosAs(l.Value)
		tensor.Fill(k, 1e38)
		l = autograd.Mul(l, autograd.Const(k))
	}
	return l
}

// scalerCfg grows the scale every 3 clean steps, so that a run of a few
// dozen steps both grows and backs off.
var scalerCfg = amp.GradScalerConfig{InitScale: 1024, GrowthInterval: 3}

// scalerWorld is newWorld with a GradScaler per rank (none when withScaler
// is false) and the overflowing loss; scales[r] receives rank r's scale
// after each of its steps.
func scalerWorld(t *testing.T, ctx context.Context, dir string, withScaler bool, scales *[world][]float32) []rank {
	t.Helper()
	return newWorldWith(t, ctx, dir, func(r int, pg comm.ProcessGroup, c *Config) {
		if withScaler {
			scaler, err := amp.NewGradScaler(scalerCfg, amp.WithGroup(pg))
			require.NoError(t, err)
			c.Scaler = scaler
		}
		record := Funcs{Step: func(_ context.Context, tr *Trainer, _ StepInfo) error {
			if scales != nil && tr.Scaler() != nil {
				scales[r] = append(scales[r], tr.Scaler().Scale())
			}
			return nil
		}}
		c.SaveEvery, c.Loss, c.Callbacks = 1, overflowing, []Callback{record}
	})
}

// A run saved after epoch 3 and resumed continues with the saved scale and
// growth tracker: its scales after every step, and its final weights, are
// those of the run that was never interrupted.
func TestGradScalerResume(t *testing.T) {
	ctx := context.Background()
	const epochs, cut = 6, 4

	var whole [world][]float32
	rs := scalerWorld(t, ctx, t.TempDir(), true, &whole)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, epochs) {
		require.NoError(t, err)
	}
	wantW := weights(rs[0].t)
	closeWorld(rs)
	require.Len(t, whole[0], epochs*4, "4 steps an epoch")
	assert.Equal(t, whole[0], whole[1], "every rank keeps the same scale")
	grew, backedOff := false, false
	for i := 1; i < len(whole[0]); i++ {
		grew = grew || whole[0][i] > whole[0][i-1]
		backedOff = backedOff || whole[0][i] < whole[0][i-1]
	}
	require.True(t, grew && backedOff, "the run should both grow and back off the scale to test anything: %v", whole[0])

	dir := t.TempDir()
	var first, second [world][]float32
	rs = scalerWorld(t, ctx, dir, true, &first)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, cut) {
		require.NoError(t, err)
	}
	closeWorld(rs)
	c := firstCheckpoint(t, dir)
	require.Equal(t, cut-1, c.Epoch)
	require.NotNil(t, c.GradScaler, "the checkpoint holds the scaler's state")
	assert.Equal(t, checkpoint.GradScalerState{Scale: whole[0][cut*4-1], GrowthFactor: 2, BackoffFactor: 0.5,
		GrowthInterval: 3, GrowthTracker: c.GradScaler.GrowthTracker}, *c.GradScaler)
	// The resume must restore what a fresh scaler would not have: a scale
	// other than the initial one, and a growth count under way.
	require.True(t, c.GradScaler.Scale != float32(scalerCfg.InitScale) && c.GradScaler.GrowthTracker != 0,
		"the saved state is too close to a fresh scaler's to test the resume: %+v", *c.GradScaler)

	again := scalerWorld(t, ctx, dir, true, &second)
	requireBuilt(t, again)
	for r := range again {
		assert.Equal(t, c.GradScaler.Scale, again[r].t.Scaler().Scale(), "rank %d resumes at the saved scale", r)
		assert.Equal(t, amp.State(*c.GradScaler), again[r].t.Scaler().State(), "rank %d", r)
	}
	for _, err := range train(ctx, again, epochs) {
		require.NoError(t, err)
	}
	for r := range world {
		assert.Equal(t, whole[r], append(first[r], second[r]...), "rank %d's scales, saved and resumed, against the uninterrupted run", r)
	}
	assert.Equal(t, wantW, weights(again[0].t), "the same steps were skipped and taken")
}

// A checkpoint without scaler state (a run without one, or the format
// before checkpoints held it) still resumes a run with a scaler: the scale
// starts as configured, and rank 0 says so.
func TestGradScalerResumeWithoutState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := scalerWorld(t, ctx, dir, false, nil)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 1) {
		require.NoError(t, err)
	}
	closeWorld(rs)
	c := firstCheckpoint(t, dir)
	require.Nil(t, c.GradScaler)

	var scales [world][]float32
	again := scalerWorld(t, ctx, dir, true, &scales)
	requireBuilt(t, again)
	assert.Contains(t, again[0].out.String(), "Resumed from epoch 0 (step 4)")
	assert.Contains(t, again[0].out.String(), "the checkpoint has no GradScaler state; the loss scale starts at 1024")
	for r := range again {
		assert.Equal(t, float32(1024), again[r].t.Scaler().Scale(), "rank %d", r)
	}
	for _, err := range train(ctx, again, 2) {
		require.NoError(t, err)
	}
	assert.Len(t, scales[0], 4, "epoch 1 trained with the scaler")
}

// -amp fp16 trains with a GradScaler whose state goes into the checkpoint
// at torch's defaults, and a second run resumes it.
func TestMainFP16(t *testing.T) {
	singleProcess(t)
	ck := filepath.Join(t.TempDir(), "ck")
	var (
		out bytes.Buffer
		c   *checkpoint.Checkpoint
	)
	args := []string{"tiny", "-amp", "fp16", "-epochs", "1", "-batch-size", "32", "-save-every", "1", "-ckpt-dir", ck}
	require.Equal(t, 0, Main(args, &out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "amp: fp16 loss scaling with a GradScaler (initial scale 65536)")
	m := regexp.MustCompile(`(?m)^epoch=0 loss=(\S+)$`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	loss, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.Less(t, loss, 1.0, "the loss logged is the unscaled one")
	c, err = checkpoint.Load(filepath.Join(ck, "ckpt-e00000000-s000000000008.safetensors"))
	require.NoError(t, err)
	require.NotNil(t, c.GradScaler)
	assert.Equal(t, checkpoint.GradScalerState{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, GrowthTracker: 8},
		*c.GradScaler, "8 clean steps at torch's defaults")

	out.Reset()
	args[4] = "2"
	require.Equal(t, 0, Main(args, &out, Defaults{}, tinyJob()), out.String())
	assert.Contains(t, out.String(), "Resumed from epoch 0 (step 8)")
	c, err = checkpoint.Load(filepath.Join(ck, "ckpt-e00000001-s000000000016.safetensors"))
	require.NoError(t, err)
	require.NotNil(t, c.GradScaler)
	assert.Equal(t, 16, c.GradScaler.GrowthTracker, "the tracker went on from the resumed 8")

	// On a device the loss is scaled there and the gradients are checked
	// and unscaled through the host.
	out.Reset()
	require.Equal(t, 0, Main([]string{"tiny", "-amp", "fp16", "-device", "sim", "-epochs", "1", "-batch-size", "32", "-ckpt-dir", ""},
		&out, Defaults{}, tinyJob()), out.String())
	require.Contains(t, out.String(), "amp: fp16 loss scaling")
}

// -amp bf16 -device sim trains with the device's bf16 GEMM (before, a
// device ran autocast's products in float32, silently), and its losses
// track the CPU's bf16 run.
func TestMainBF16OnSim(t *testing.T) {
	singleProcess(t)
	losses := func(device string, prec ...string) []string {
		var out bytes.Buffer
		require.Equal(t, 0, Main([]string{"tiny", "-amp", append(prec, "bf16")[0], "-device", device, "-epochs", "2", "-batch-size", "32", "-ckpt-dir", ""},
			&out, Defaults{}, tinyJob()), out.String())
		if device == "sim" && len(prec) == 0 {
			require.Contains(t, out.String(), "amp: bf16 products in 1 layers, on sim:0 (its bf16 GEMM)")
		}
		return regexp.MustCompile(`(?m)^epoch=\d+ loss=\S+$`).FindAllString(out.String(), -1)
	}
	cpu, sim := losses("cpu"), losses("sim")
	require.Len(t, cpu, 2)
	assert.Equal(t, cpu, sim, "the epochs' mean losses, to 4 decimals")
	assert.NotEqual(t, sim, losses("sim", "fp32"), "float32 products give other losses")
}

// firstCheckpoint loads the oldest checkpoint of dir.
func firstCheckpoint(t *testing.T, dir string) *checkpoint.Checkpoint {
	t.Helper()
	m, err := checkpoint.NewManager(dir)
	require.NoError(t, err)
	paths, err := m.List()
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no checkpoint in %s", dir)
	c, err := checkpoint.Load(paths[0])
	require.NoError(t, err)
	return c
}
