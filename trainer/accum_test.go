package trainer

import (
	"bytes"
	"context"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// recipeRun trains Linear(4, 2) (seed 1, so the same model every run) on
// n random samples for epochs epochs at world 2 over an in-memory group,
// batch batch per rank, SGD lr 0.1 momentum 0.9, with c finishing each
// rank's Config. It returns rank 0's weights, each rank's trainer and the
// gradient all-reduces (float32 collectives) each rank issued in Train.
func recipeRun(t *testing.T, n, batch, epochs int, c func(r int, cfg *Config)) ([]float32, []*Trainer, []int) {
	t.Helper()
	ctx := context.Background()
	rng := tensor.NewRNG(7)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, n, 4), tensor.Rand(rng, tensor.Float32, n, 2))
	require.NoError(t, err)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	trs := make([]*Trainer, world)
	reduces := make([]int, world)
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
		if err != nil {
			return err
		}
		loader, err := data.NewDataLoader(ds, data.BatchSize(batch), data.WithSampler(sampler))
		if err != nil {
			return err
		}
		model, err := ddp.Wrap(ctx, nn.NewLinear(tensor.NewRNG(1), 4, 2), pg)
		if err != nil {
			return err
		}
		t.Cleanup(func() { model.Close() })
		opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		if err != nil {
			return err
		}
		cfg := Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
			GPUID: r, BatchSize: batch, Loss: mse, Out: &bytes.Buffer{}}
		if c != nil {
			c(r, &cfg)
		}
		if trs[r], err = New(ctx, cfg); err != nil {
			return err
		}
		before := gradReduces(pg)
		err = trs[r].Train(ctx, epochs)
		reduces[r] = gradReduces(pg) - before
		return err
	})
	t.Cleanup(func() {
		for _, tr := range trs {
			tr.Close()
		}
	})
	require.Equal(t, weights(trs[0]), weights(trs[1]), "the ranks hold the same model")
	return weights(trs[0]), trs, reduces
}

// gradReduces counts the float32 all-reduces pg has issued: DDP's
// gradient buckets (the trainer's own collectives are float64).
func gradReduces(pg comm.ProcessGroup) int {
	n := 0
	for _, op := range pg.(*commtest.Group).Ops() {
		if op.Kind == "allreduce" && op.DType == backend.Float32 {
			n++
		}
	}
	return n
}

// Two micro-batches of 4 accumulated per step train exactly as one batch
// of 8 (torch's no_sync accumulation with the loss divided by 2), with one
// gradient all-reduce per optimizer step instead of one per batch.
func TestGradAccumEqualsDoubledBatch(t *testing.T) {
	want, ref, refReduces := recipeRun(t, 64, 8, 2, nil) // 32 samples a rank: 4 steps an epoch
	got, trs, reduces := recipeRun(t, 64, 4, 2, func(_ int, c *Config) { c.GradAccum = 2 })
	assert.InDeltaSlice(t, want, got, 1e-6)
	buckets := len(trs[0].Stats().BucketBytes)
	for r, tr := range trs {
		assert.Equal(t, 8, tr.Step(), "rank %d counts optimizer steps", r)
		assert.Equal(t, int64(8), tr.Stats().Iterations, "rank %d: synchronised backward passes", r)
		assert.Equal(t, 8*buckets, reduces[r], "rank %d: one all-reduce per bucket per optimizer step", r)
	}
	assert.Equal(t, refReduces[0], reduces[0], "as many all-reduces as without accumulation")
	assert.Equal(t, 8, ref[0].Step())
	// The logged loss is the micro-batches' mean: the same as the batch of 8's.
	assert.InDelta(t, ref[0].mon.lastEpochLoss, trs[0].mon.lastEpochLoss, 1e-6)
	assert.Contains(t, trs[0].out.(*bytes.Buffer).String(), "[cpu0] Epoch 1 | Batchsize: 4 | Steps: 4 | Grad accum: 2")
}

// An epoch whose batch count is not a multiple of GradAccum steps on its
// last, short group too, with the mean loss's gradient: 12 samples a rank
// in micro-batches of 4, accumulated by 2, train as batches of 8 and 4.
func TestGradAccumShortLastGroup(t *testing.T) {
	want, _, _ := recipeRun(t, 24, 8, 3, nil)
	got, trs, reduces := recipeRun(t, 24, 4, 3, func(_ int, c *Config) { c.GradAccum = 2 })
	assert.InDeltaSlice(t, want, got, 1e-6)
	buckets := len(trs[0].Stats().BucketBytes)
	for r, tr := range trs {
		assert.Equal(t, 6, tr.Step(), "rank %d: 2 steps an epoch", r)
		assert.Equal(t, 6*buckets, reduces[r], "rank %d", r)
	}
}

// ClipNorm clips the gradients averaged over the ranks, as
// clip_grad_norm_ after DDP's backward: Linear(1, 1) from w = b = 0 on
// (x=1, y=2) and (x=1, y=4), one sample a rank, has the MSE gradients
// (-4, -4) and (-8, -8) on the ranks, (-6, -6) averaged, norm 6*sqrt(2);
// clipped to 1, SGD lr 0.1 moves w and b by 0.6/(6*sqrt(2)+1e-6).
func TestClipNormIsGlobal(t *testing.T) {
	ctx := context.Background()
	ds, err := data.NewTensorDataset(tensor.FromF32([]float32{1, 1}, 2, 1), tensor.FromF32([]float32{2, 4}, 2, 1))
	require.NoError(t, err)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	trs := make([]*Trainer, world)
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
		if err != nil {
			return err
		}
		loader, err := data.NewDataLoader(ds, data.BatchSize(1), data.WithSampler(sampler))
		if err != nil {
			return err
		}
		lin := nn.NewLinear(tensor.NewRNG(1), 1, 1)
		for _, p := range nn.Parameters(lin) {
			clear(p.Value.F32())
		}
		model, err := ddp.Wrap(ctx, lin, pg)
		if err != nil {
			return err
		}
		t.Cleanup(func() { model.Close() })
		opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
		if err != nil {
			return err
		}
		trs[r], err = New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
			GPUID: r, BatchSize: 1, Loss: mse, Out: &bytes.Buffer{}, ClipNorm: 1})
		if err != nil {
			return err
		}
		t.Cleanup(func() { trs[r].Close() })
		return trs[r].Train(ctx, 1)
	})
	norm := 6 * math.Sqrt2
	step := 0.1 * 6 / (norm + 1e-6)
	for r, tr := range trs {
		assert.InDelta(t, norm, tr.GradNorm(), 1e-5, "rank %d sees the global norm", r)
		assert.InDeltaSlice(t, []float32{float32(step), float32(step)}, weights(tr), 1e-6, "rank %d", r)
	}
}

// A run resumed mid-schedule goes on with the schedule where it stopped:
// two epochs, then a third after a resume, train exactly as three in one
// run, and the resumed scheduler is at the saved step.
func TestResumeMidSchedule(t *testing.T) {
	sched := func(dir string) func(int, *Config) {
		return func(_ int, c *Config) {
			s, err := optim.NewWarmupCosineLR(c.Optimizer, 3, 10, 0.01)
			require.NoError(t, err)
			c.Scheduler, c.CkptDir, c.SaveEvery = s, dir, 1
		}
	}
	want, whole, _ := recipeRun(t, 64, 8, 3, sched(t.TempDir()))
	assert.Equal(t, 12, whole[0].sched.LastEpoch())
	assert.InDelta(t, optim.WarmupCosine(12, 3, 10, 0.1, 0.01), whole[0].LR(), 1e-15)

	dir := t.TempDir()
	_, first, _ := recipeRun(t, 64, 8, 2, sched(dir))
	for _, tr := range first {
		require.NoError(t, tr.Close())
	}
	got, resumed, _ := recipeRun(t, 64, 8, 3, func(r int, c *Config) {
		sched(dir)(r, c)
	})
	assert.Equal(t, 12, resumed[0].sched.LastEpoch())
	assert.Contains(t, resumed[0].out.(*bytes.Buffer).String(), "Resumed from epoch 1 (step 8)")
	assert.Equal(t, want, got, "the resumed run trains as the uninterrupted one")
}

// The resumed scheduler's position and the optimizer's learning rate are
// the checkpoint's before any step runs.
func TestResumeRestoresLR(t *testing.T) {
	dir := t.TempDir()
	sched := func(_ int, c *Config) {
		s, err := optim.NewWarmupCosineLR(c.Optimizer, 3, 10, 0.01)
		require.NoError(t, err)
		c.Scheduler, c.CkptDir, c.SaveEvery = s, dir, 1
	}
	_, first, _ := recipeRun(t, 64, 8, 1, sched)
	for _, tr := range first {
		require.NoError(t, tr.Close())
	}
	_, resumed, _ := recipeRun(t, 64, 8, 1, sched) // epoch 0 is done: nothing to train
	for r, tr := range resumed {
		assert.Equal(t, 4, tr.sched.LastEpoch(), "rank %d", r)
		assert.InDelta(t, optim.WarmupCosine(4, 3, 10, 0.1, 0.01), tr.LR(), 1e-15, "rank %d", r)
	}
}

// EvalEvery evaluates between steps (not at a step that ends the epoch,
// which the epoch's evaluation covers), and EvalBatches caps every
// evaluation at the evaluation set's first batches: 101 samples dealt 51
// and 50, batches of 7, one batch a rank: samples 0-13.
func TestEvalEveryAndEvalBatches(t *testing.T) {
	ctx := context.Background()
	train, eval := labeled(t, 3, 64), labeled(t, 4, 101)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	trs := make([]*Trainer, world)
	outs := make([]*bytes.Buffer, world)
	mem := &Memory{}
	evals := make([][]int, world)
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		sampler, err := data.NewDistributedSampler(train, data.SamplerGroup(pg), data.SamplerSeed(1))
		if err != nil {
			return err
		}
		loader, err := data.NewDataLoader(train, data.BatchSize(8), data.WithSampler(sampler))
		if err != nil {
			return err
		}
		es, err := data.NewDistributedSampler(eval, data.SamplerGroup(pg), data.SamplerShuffle(false), data.SamplerEval())
		if err != nil {
			return err
		}
		evalLoader, err := data.NewDataLoader(eval, data.BatchSize(7), data.WithSampler(es))
		if err != nil {
			return err
		}
		model, err := ddp.Wrap(ctx, nn.NewLinear(tensor.NewRNG(1), 4, 3), pg)
		if err != nil {
			return err
		}
		t.Cleanup(func() { model.Close() })
		opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.5})
		if err != nil {
			return err
		}
		outs[r] = &bytes.Buffer{}
		var loggers []Logger
		if r == 0 {
			loggers = []Logger{mem}
		}
		hook := Funcs{Eval: func(_ context.Context, _ *Trainer, e EvalInfo) error {
			evals[r] = append(evals[r], e.Step)
			return nil
		}}
		trs[r], err = New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
			GPUID: r, BatchSize: 8, Loss: crossEntropy, Out: outs[r], EvalData: evalLoader,
			EvalEvery: 3, EvalBatches: 1, Loggers: loggers, Callbacks: []Callback{hook}})
		if err != nil {
			return err
		}
		t.Cleanup(func() { trs[r].Close() })
		return trs[r].Train(ctx, 2)
	})
	// 4 steps an epoch: step 3 mid-epoch 0, epoch 0's end (4), step 6,
	// epoch 1's end (8); step 9 would come after the run.
	for r := range world {
		assert.Equal(t, []int{3, 4, 6, 8}, evals[r], "rank %d's eval hooks", r)
	}
	out := outs[0].String()
	assert.Contains(t, out, "epoch=0 step=3 test_loss=")
	assert.Contains(t, out, "epoch=1 step=6 test_loss=")
	var steps []int
	for _, rec := range mem.Records() {
		if rec.Kind == KindEval {
			steps = append(steps, rec.Step)
		}
	}
	assert.Equal(t, []int{3, 4, 6, 8}, steps, "eval records")

	// The last evaluation read samples 0-13 only.
	m := trs[0].model.Module()
	var want float64
	nn.NoGrad(m, func() {
		b := data.Batch{Inputs: tensor.New(tensor.Float32, 14, 4), Labels: make([]int, 14)}
		for i := range 14 {
			s, err := eval.Get(i)
			require.NoError(t, err)
			copy(b.Inputs.F32()[4*i:4*i+4], s.Input.Contiguous().F32())
			b.Labels[i] = s.Label
		}
		want = crossEntropy(m.Forward(autograd.Const(b.Inputs)), b).Value.Item()
	})
	line := regexp.MustCompile(`epoch=1 test_loss=([0-9.]+)`).FindStringSubmatch(out)
	require.NotNil(t, line, out)
	got, _ := strconv.ParseFloat(line[1], 64)
	assert.InDelta(t, want, got, 5e-5)
}

// The recipe's options are checked when the Trainer is built.
func TestRecipeConfigErrors(t *testing.T) {
	step := func(context.Context, data.Batch) (float64, error) { return 0, nil }
	for name, c := range map[string]Config{
		"negative accum":           {GradAccum: -1},
		"negative clip":            {ClipNorm: -1},
		"accum with Step":          {GradAccum: 2, Step: step},
		"clip with Step":           {ClipNorm: 1, Step: step},
		"eval every, no eval data": {EvalEvery: 5},
	} {
		assert.Error(t, c.checkRecipe(), name)
	}
	assert.NoError(t, (&Config{GradAccum: 4, ClipNorm: 1}).checkRecipe())
}

// Accumulation under Join: shards that deal ranks uneven batch counts (5
// and 3 batches of 8, accumulated by 2) train with every rank on the same
// cadence, a synchronised backward every second batch: the rank that runs
// out shadows the other's, and each rank's last, odd batch is never
// all-reduced (dropped, as in torch's `if (i+1) % accum == 0: step` loop
// under Join) rather than synchronised alone, which the other rank, inside
// a group, would not match. The ranks end with the same model.
func TestGradAccumUnevenShards(t *testing.T) {
	ctx := context.Background()
	rng := tensor.NewRNG(1)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 64, 4), tensor.Rand(rng, tensor.Float32, 64, 1))
	require.NoError(t, err)
	paths, err := data.WriteShards(ds, t.TempDir(), "s", 40, data.ShardNPY) // 40 and 24
	require.NoError(t, err)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	var steps [world]int
	var w [world][]float32
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		sds, err := data.OpenShards(paths, data.ShardGroup(pg), data.ShardSeed(1))
		if err != nil {
			return err
		}
		stream, err := data.NewStreamLoader(sds, data.BatchSize(8))
		if err != nil {
			return err
		}
		model, err := ddp.Wrap(ctx, nn.NewLinear(tensor.NewRNG(2), 4, 1), pg)
		if err != nil {
			return err
		}
		defer model.Close()
		opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
		if err != nil {
			return err
		}
		tr, err := New(ctx, Config{Model: model, TrainStream: stream, Optimizer: opt, GPUID: r, BatchSize: 8,
			Loss: mse, Out: &bytes.Buffer{}, GradAccum: 2})
		if err != nil {
			return err
		}
		defer tr.Close()
		if err := tr.Train(ctx, 1); err != nil {
			return err
		}
		steps[r], w[r] = tr.Step(), weights(tr)
		return nil
	})
	assert.ElementsMatch(t, []int{2, 1}, steps[:], "5/2 and 3/2 optimizer steps, rounded down")
	assert.Equal(t, w[0], w[1], "Join keeps the ranks' models equal")
}
