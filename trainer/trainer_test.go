package trainer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

const world = 2

var mse LossFunc = func(out *autograd.Variable, b data.Batch) *autograd.Variable {
	return autograd.MSELoss(out, autograd.Const(b.Targets), autograd.ReductionMean)
}

// rank is one rank's trainer and its output.
type rank struct {
	t   *Trainer
	out *bytes.Buffer
	err error
}

// newWorld builds the tutorial's job (linear(4, 1) on 64 random samples,
// batch 8) on an in-memory group of two ranks, with checkpoints in dir.
func newWorld(t *testing.T, ctx context.Context, dir string, saveEvery int, loss LossFunc) []rank {
	t.Helper()
	return newWorldWith(t, ctx, dir, func(_ int, _ comm.ProcessGroup, c *Config) {
		c.SaveEvery, c.Loss = saveEvery, loss
	})
}

// newWorldWith is newWorld with each rank's Config finished by adjust.
func newWorldWith(t *testing.T, ctx context.Context, dir string, adjust func(r int, pg comm.ProcessGroup, c *Config)) []rank {
	t.Helper()
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	rs := make([]rank, world)
	var wg sync.WaitGroup
	for r, pg := range pgs {
		wg.Go(func() {
			rs[r].out = &bytes.Buffer{}
			c := tutorialJob(t, ctx, pg, 0.9)
			c.GPUID, c.CkptDir, c.Out = r, dir, rs[r].out
			adjust(r, pg, &c)
			rs[r].t, rs[r].err = New(ctx, c)
		})
	}
	wg.Wait()
	t.Cleanup(func() { closeWorld(rs) })
	return rs
}

// tutorialJob is the tutorial's job on pg: Linear(4, 1) on 64 random
// samples (seed 1), batch 8, SGD with lr 0.1 and the given momentum. The
// model is closed when the test ends.
func tutorialJob(t *testing.T, ctx context.Context, pg comm.ProcessGroup, momentum float64) Config {
	t.Helper()
	rng := tensor.NewRNG(1)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 64, 4), tensor.Rand(rng, tensor.Float32, 64, 1))
	require.NoError(t, err)
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
	require.NoError(t, err)
	loader, err := data.NewDataLoader(ds, data.BatchSize(8), data.WithSampler(sampler))
	require.NoError(t, err)
	model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 4, 1), pg)
	require.NoError(t, err)
	t.Cleanup(func() { model.Close() })
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1, Momentum: momentum})
	require.NoError(t, err)
	return Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: 8}
}

// closeWorld closes the trainers built, as the job's end does, releasing
// the checkpoint directory.
func closeWorld(rs []rank) {
	for _, r := range rs {
		if r.t != nil {
			r.t.Close()
		}
	}
}

func requireBuilt(t *testing.T, rs []rank) {
	t.Helper()
	for r := range rs {
		require.NoError(t, rs[r].err, "rank %d", r)
	}
}

// train runs Train on every rank and returns their errors.
func train(ctx context.Context, rs []rank, epochs int) []error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for r := range rs {
		wg.Go(func() { errs[r] = rs[r].t.Train(ctx, epochs) })
	}
	wg.Wait()
	return errs
}

func weights(tr *Trainer) []float32 {
	var w []float32
	sd := checkpoint.StateDict(tr.model.Module())
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range sd {
			if !yield(k) {
				return
			}
		}
	}) {
		w = append(w, sd[k].Contiguous().F32()...)
	}
	return w
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	m, err := checkpoint.NewManager(dir)
	require.NoError(t, err)
	paths, err := m.List()
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}

// Checkpoints come every SaveEvery epochs (epoch%SaveEvery == 0), from rank
// 0 only, and only the last three are kept.
func TestSaveCadence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, rs)
	for r, err := range train(ctx, rs, 7) {
		require.NoError(t, err, "rank %d", r)
	}
	// 4 steps per epoch per rank (64 samples / 2 ranks / batch 8); epochs
	// 0, 2, 4 and 6 save, and keep-last-3 prunes epoch 0's.
	assert.Equal(t, []string{
		"ckpt-e00000006-s000000000028.safetensors",
		"ckpt-e00000004-s000000000020.safetensors",
		"ckpt-e00000002-s000000000012.safetensors",
	}, listNames(t, dir))
	out := rs[0].out.String()
	for e := range 7 {
		for r := range rs {
			assert.Contains(t, rs[r].out.String(), fmt.Sprintf("[cpu%d] Epoch %d | Batchsize: 8 | Steps: 4", r, e), "every rank names its device")
		}
		assert.Equal(t, e%2 == 0, strings.Contains(out, fmt.Sprintf("Epoch %d | Training checkpoint saved at", e)), "epoch %d", e)
	}
	assert.NotContains(t, rs[1].out.String(), "checkpoint saved", "only rank 0 saves")
	assert.Equal(t, weights(rs[0].t), weights(rs[1].t), "ranks hold the same model")
}

// A new run in the same directory resumes after the newest checkpoint,
// with its weights, and runs only the remaining epochs.
func TestResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 5) {
		require.NoError(t, err)
	}
	saved := weights(rs[0].t) // epoch 4 was the last one and was saved
	closeWorld(rs)

	again := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, again)
	for r := range again {
		assert.Equal(t, 5, again[r].t.start, "rank %d starts after the saved epoch", r)
		assert.Equal(t, 20, again[r].t.step, "rank %d continues the step count", r)
		assert.Equal(t, saved, weights(again[r].t), "rank %d holds the saved weights", r)
	}
	assert.Contains(t, again[0].out.String(), "Resumed from epoch 4 (step 20)")
	for _, err := range train(ctx, again, 7) {
		require.NoError(t, err)
	}
	out := again[0].out.String()
	assert.NotContains(t, out, "Epoch 4 |")
	assert.Contains(t, out, "[cpu0] Epoch 5 |")
	assert.Contains(t, out, "[cpu0] Epoch 6 |")
	assert.Contains(t, out, "Epoch 6 | Training checkpoint saved at")
}

// A corrupt newest checkpoint is skipped, named, and moved aside; the run
// resumes from the one before.
func TestResumeSkipsCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 5) {
		require.NoError(t, err)
	}
	closeWorld(rs)
	newest := filepath.Join(dir, "ckpt-e00000004-s000000000020.safetensors")
	require.NoError(t, os.WriteFile(newest, []byte("not a checkpoint"), 0o644))

	again := newWorld(t, ctx, dir, 2, mse)
	requireBuilt(t, again)
	out := again[0].out.String()
	assert.Contains(t, out, "Skipped checkpoint "+newest)
	assert.Contains(t, out, "Resumed from epoch 2 (step 12)")
	assert.FileExists(t, newest+".corrupt")
	assert.NoFileExists(t, newest)
	assert.Equal(t, 3, again[1].t.start)
}

// When checkpoint files exist but none loads, every rank refuses to start
// over, and rank 0's error names the directory.
func TestResumeRefusesWhenNothingLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ckpt-e00000003-s000000000016.safetensors"), []byte("junk"), 0o644))
	rs := newWorld(t, ctx, dir, 2, mse)
	require.Error(t, rs[0].err)
	assert.Contains(t, rs[0].err.Error(), "no checkpoint in "+dir+" loads")
	require.Error(t, rs[1].err)
	assert.Contains(t, rs[1].err.Error(), "rank 0 found no loadable checkpoint")
}

// A failing step stops Train with an error naming the epoch and step.
func TestTrainStepError(t *testing.T) {
	ctx := context.Background()
	notScalar := func(out *autograd.Variable, b data.Batch) *autograd.Variable { return out }
	rs := newWorld(t, ctx, "", 1, notScalar)
	requireBuilt(t, rs)
	for r, err := range train(ctx, rs, 2) {
		require.Error(t, err, "rank %d", r)
		assert.Contains(t, err.Error(), "trainer: epoch 0 step 0", "rank %d", r)
		assert.Contains(t, err.Error(), "want a scalar", "rank %d", r)
	}
}

// Throughput counts every rank's samples after the warm-up steps: of the
// first epoch's 4 steps of 8 samples, the last 2 (half an epoch this
// short), then every later epoch whole.
func TestSamplesPerSecond(t *testing.T) {
	ctx := context.Background()
	rs := newWorld(t, ctx, "", 0, mse)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 3) {
		require.NoError(t, err)
	}
	for r := range rs {
		assert.EqualValues(t, 2*8+2*32, rs[r].t.samples, "rank %d: half the first epoch, then two epochs of 32 samples", r)
	}
	got := make([]float64, world)
	var wg sync.WaitGroup
	for r := range rs {
		wg.Go(func() {
			var err error
			got[r], err = rs[r].t.SamplesPerSecond(ctx)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Positive(t, got[0])
	assert.Equal(t, got[0], got[1], "every rank reports the same figure")
}

// -epochs 1 measures something: the first epoch is not thrown away whole.
func TestSamplesPerSecondOneEpoch(t *testing.T) {
	ctx := context.Background()
	rs := newWorld(t, ctx, "", 0, mse)
	requireBuilt(t, rs)
	for _, err := range train(ctx, rs, 1) {
		require.NoError(t, err)
	}
	got := make([]float64, world)
	var wg sync.WaitGroup
	for r := range rs {
		assert.EqualValues(t, 2*8, rs[r].t.samples, "rank %d: the steps after the warm-up", r)
		wg.Go(func() {
			var err error
			got[r], err = rs[r].t.SamplesPerSecond(ctx)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Positive(t, got[0])
}

// MaxSteps ends training mid-epoch after that many steps in all: the
// epoch it falls in is saved as the last, and no later epoch runs.
func TestMaxSteps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := newWorld(t, ctx, dir, 3, mse)
	requireBuilt(t, rs)
	for r := range rs {
		rs[r].t.maxSteps = 6 // epoch 0's 4 steps, then 2 of epoch 1's
	}
	for r, err := range train(ctx, rs, 7) {
		require.NoError(t, err, "rank %d", r)
	}
	for r := range rs {
		assert.Equal(t, 6, rs[r].t.step, "rank %d's steps", r)
		assert.NotContains(t, rs[r].out.String(), "Epoch 2 |", "rank %d trained past -max-steps", r)
	}
	assert.Contains(t, rs[0].out.String(), "Epoch 1 | stopping: reached -max-steps 6")
	// Epoch 0 saves by the cadence (0%3 == 0); epoch 1 saves as the last.
	assert.Equal(t, []string{
		"ckpt-e00000001-s000000000006.safetensors",
		"ckpt-e00000000-s000000000004.safetensors",
	}, listNames(t, dir))
	assert.Equal(t, weights(rs[0].t), weights(rs[1].t), "ranks hold the same model")
}
