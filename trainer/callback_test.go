package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// evalWorld trains a linear classifier on n ranks of an in-memory group
// with an evaluation set (64 training samples: 4 steps of 8 per rank at
// world 2); callbacks(r) gives rank r's callbacks.
func evalWorld(t *testing.T, n int, lr float64, epochs int, callbacks func(r int) []Callback) ([]*Trainer, []*bytes.Buffer, []error) {
	t.Helper()
	ctx := context.Background()
	train, eval := labeled(t, 3, 64), labeled(t, 4, 40)
	pgs := commtest.NewGroups(n, commtest.WithTimeout(time.Minute))
	trainers := make([]*Trainer, n)
	outs := make([]*bytes.Buffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, pg := range pgs {
		outs[r] = &bytes.Buffer{}
		wg.Go(func() {
			errs[r] = func() error {
				rng := tensor.NewRNG(1)
				sampler, err := data.NewDistributedSampler(train, data.SamplerGroup(pg), data.SamplerSeed(1))
				require.NoError(t, err)
				loader, err := data.NewDataLoader(train, data.BatchSize(8), data.WithSampler(sampler))
				require.NoError(t, err)
				es, err := data.NewDistributedSampler(eval, data.SamplerGroup(pg), data.SamplerShuffle(false), data.SamplerEval())
				require.NoError(t, err)
				evalLoader, err := data.NewDataLoader(eval, data.BatchSize(10), data.WithSampler(es))
				require.NoError(t, err)
				model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 4, 3), pg)
				require.NoError(t, err)
				t.Cleanup(func() { model.Close() })
				opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: lr})
				require.NoError(t, err)
				trainers[r], err = New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
					GPUID: r, BatchSize: 8, Loss: crossEntropy, Out: outs[r], EvalData: evalLoader, Callbacks: callbacks(r)})
				if err != nil {
					return err
				}
				return trainers[r].Train(ctx, epochs)
			}()
		})
	}
	wg.Wait()
	return trainers, outs, errs
}

// With a learning rate of 0 the evaluation loss never improves: patience 2
// stops both ranks after the third evaluation (epoch 2), not after 10.
func TestEarlyStoppingStops(t *testing.T) {
	var evals [world]int
	trainers, outs, errs := evalWorld(t, world, 0, 10, func(r int) []Callback {
		return []Callback{&EarlyStopping{Metric: "loss", Patience: 2},
			Funcs{Eval: func(context.Context, *Trainer, EvalInfo) error { evals[r]++; return nil }}}
	})
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, 3, evals[r], "rank %d evaluated epochs 0, 1, 2", r)
		assert.Equal(t, 3*4, trainers[r].Step(), "rank %d: three epochs of 4 steps", r)
		assert.Contains(t, trainers[r].Stopped(), "eval loss has not improved", "rank %d", r)
	}
	assert.Contains(t, outs[0].String(), "Epoch 2 | stopping early: eval loss has not improved")
	assert.NotContains(t, outs[0].String(), "Epoch 3 |")
}

// A stop asked by one rank alone, mid-epoch, stops every rank after that
// epoch, so no rank is left waiting in a collective.
func TestStopAgreedByAllRanks(t *testing.T) {
	trainers, outs, errs := evalWorld(t, world, 0.1, 10, func(r int) []Callback {
		return []Callback{Funcs{Step: func(_ context.Context, tr *Trainer, s StepInfo) error {
			if r == 1 && s.Step == 6 {
				tr.Stop("rank 1 had enough")
			}
			return nil
		}}}
	})
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, 2*4, trainers[r].Step(), "rank %d stopped after epoch 1", r)
	}
	assert.Equal(t, "rank 1 had enough", trainers[1].Stopped())
	assert.Equal(t, "rank 1: rank 1 had enough", trainers[0].Stopped())
	assert.Contains(t, outs[0].String(), "Epoch 1 | stopping early: rank 1: rank 1 had enough")
}

func TestCallbackMustImplementAHook(t *testing.T) {
	_, _, errs := evalWorld(t, 1, 0.1, 1, func(int) []Callback { return []Callback{42} })
	require.ErrorContains(t, errs[0], "Callbacks[0] (int) implements none of OnStep, OnEpochEnd, OnEval")
}

// KeepBest keeps the checkpoint of the best evaluation, not the last, and
// a KeepBest started on an existing file (a resumed run) does not replace
// it with a worse model.
func TestKeepBestKeepsTheBest(t *testing.T) {
	ctx := context.Background()
	trainers, _, errs := evalWorld(t, 1, 0.1, 1, func(int) []Callback { return nil })
	require.NoError(t, errs[0])
	tr := trainers[0]
	path := filepath.Join(t.TempDir(), "best.safetensors")
	stored := func() (epoch int, value float64) {
		t.Helper()
		c, err := checkpoint.Load(path)
		require.NoError(t, err)
		var bc bestConfig
		require.NoError(t, json.Unmarshal(c.Config, &bc))
		require.Equal(t, "loss", bc.Metric)
		return c.Epoch, bc.Value
	}
	kb := &KeepBest{Metric: "loss", Path: path}
	assert.True(t, math.IsNaN(kb.Best()))
	for epoch, v := range []float64{3, 1, 2, 1.5} {
		require.NoError(t, kb.OnEval(ctx, tr, EvalInfo{Epoch: epoch, Metrics: map[string]float64{"loss": v}}))
	}
	e, v := stored()
	assert.Equal(t, 1, e, "epoch 1 had the lowest loss")
	assert.Equal(t, 1.0, v)
	assert.Equal(t, 1.0, kb.Best())

	again := &KeepBest{Metric: "loss", Path: path}
	require.NoError(t, again.OnEval(ctx, tr, EvalInfo{Epoch: 7, Metrics: map[string]float64{"loss": 1.2}}))
	e, _ = stored()
	assert.Equal(t, 1, e, "a resumed KeepBest starts from the file's value")
	require.NoError(t, again.OnEval(ctx, tr, EvalInfo{Epoch: 8, Metrics: map[string]float64{"loss": 0.5}}))
	e, v = stored()
	assert.Equal(t, 8, e)
	assert.Equal(t, 0.5, v)

	acc := &KeepBest{Metric: "acc", Mode: Max, Path: filepath.Join(t.TempDir(), "acc.safetensors")}
	for epoch, v := range []float64{0.2, 0.9, 0.4} {
		require.NoError(t, acc.OnEval(ctx, tr, EvalInfo{Epoch: epoch, Metrics: map[string]float64{"acc": v}}))
	}
	assert.Equal(t, 0.9, acc.Best())
	c, err := checkpoint.Load(acc.Path)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Epoch)

	err = acc.OnEval(ctx, tr, EvalInfo{Metrics: map[string]float64{"loss": 1}})
	require.ErrorContains(t, err, `the evaluation has no "acc" (it has [loss])`)
	wrong := &KeepBest{Metric: "acc", Mode: Max, Path: path}
	err = wrong.OnEval(ctx, tr, EvalInfo{Metrics: map[string]float64{"acc": 1}})
	require.ErrorContains(t, err, `holds no best "acc"; refusing to overwrite it`)
}

// Off a terminal, Progress prints whole lines, at most one per Every and
// one at the end of an epoch in which it printed; on a terminal, one bar
// redrawn with \r.
func TestProgressLines(t *testing.T) {
	ctx := context.Background()
	tr := &Trainer{device: "cpu0"}
	var buf bytes.Buffer
	p := NewProgress(&buf)
	require.False(t, p.tty, "a buffer is not a terminal")
	p.Every = 10 * time.Second
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	run := func(steps int, dt time.Duration) {
		for i := 1; i <= steps; i++ {
			require.NoError(t, p.OnStep(ctx, tr, StepInfo{Epoch: 0, Index: i, Steps: steps, RunningLoss: 0.5}))
			clock = clock.Add(dt)
		}
	}
	run(6, 4*time.Second) // steps at 0, 4, 8, 12, 16, 20 s
	assert.NotContains(t, buf.String(), "\r")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Equal(t, []string{
		"[cpu0] Epoch 0 [====================          ] 4/6 loss 0.5000",
		"[cpu0] Epoch 0 [==============================] 6/6 loss 0.5000",
	}, lines)

	buf.Reset()
	run(6, time.Millisecond) // a fast epoch prints nothing
	assert.Empty(t, buf.String())

	buf.Reset()
	p.tty = true
	run(2, time.Millisecond)
	assert.Equal(t, "\r[cpu0] Epoch 0 [===============               ] 1/2 loss 0.5000"+
		"\r[cpu0] Epoch 0 [==============================] 2/2 loss 0.5000\n", buf.String())
}

// Config.Step replaces the built-in step: the Trainer counts its steps,
// logs its losses and runs the hooks around it.
func TestCustomStep(t *testing.T) {
	ctx := context.Background()
	pg := commtest.NewGroups(1, commtest.WithTimeout(time.Minute))[0]
	rng := tensor.NewRNG(1)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 32, 4), tensor.Rand(rng, tensor.Float32, 32, 1))
	require.NoError(t, err)
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg))
	require.NoError(t, err)
	loader, err := data.NewDataLoader(ds, data.BatchSize(8), data.WithSampler(sampler))
	require.NoError(t, err)
	model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 4, 1), pg)
	require.NoError(t, err)
	defer model.Close()
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	cfg := Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: 8, Out: &bytes.Buffer{}}
	_, err = New(ctx, cfg)
	require.ErrorContains(t, err, "Config needs Loss")

	calls := 0
	var losses []float64
	var mem Memory
	cfg.Step = func(_ context.Context, b data.Batch) (float64, error) {
		calls++
		require.Equal(t, 8, b.Size())
		return float64(calls), nil
	}
	cfg.Loggers, cfg.LogEvery = []Logger{&mem}, 2
	cfg.Callbacks = []Callback{Funcs{Step: func(_ context.Context, _ *Trainer, s StepInfo) error {
		losses = append(losses, s.Loss)
		return nil
	}}}
	tr, err := New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, tr.Train(ctx, 2))
	assert.Equal(t, 8, calls)
	assert.Equal(t, 8, tr.Step())
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 6, 7, 8}, losses)
	var train []float64
	for _, r := range mem.Records() {
		if r.Kind == KindTrain {
			train = append(train, r.Loss)
		}
	}
	assert.Equal(t, []float64{1.5, 3.5, 5.5, 7.5}, train, "each record is the mean over its 2 steps")
}
