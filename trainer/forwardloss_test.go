package trainer

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/models/gpt2"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// gpt2Run trains a tiny GPT-2 (2 layers, width 16, vocabulary 61, context
// 8; seed 3, so the same model every run) on 24 random token sequences
// for 3 optimizer steps at world 2 over an in-memory group, 4 sequences
// per micro-batch and accum micro-batches per step (2: a step of two
// and a short one of one, then the next epoch), AdamW lr 1e-2. With
// fused set the Config's ForwardLoss is the model's ForwardLoss (the tied
// head and cross-entropy as one op), counted in calls; Loss is Forward's
// logits through Model.Loss either way. With scaled set each rank has a
// GradScaler (initial scale 1024). It returns each rank's step losses.
func gpt2Run(t *testing.T, fused bool, accum int, scaled bool) (losses [world][]float64, calls [world]int) {
	t.Helper()
	ctx := context.Background()
	const n, T, vocab, batch = 24, 8, 61, 4
	rng := tensor.NewRNG(5)
	toks := make([]int, n*(T+1))
	for i := range toks {
		toks[i] = int(rng.Random() % vocab)
	}
	in, tg := make([]int, 0, n*T), make([]int, 0, n*T)
	for s := range n {
		row := toks[s*(T+1) : (s+1)*(T+1)]
		in, tg = append(in, row[:T]...), append(tg, row[1:]...)
	}
	ds, err := data.NewTensorDataset(tensor.FromInts(in, n, T), tensor.FromInts(tg, n, T))
	require.NoError(t, err)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	trs := make([]*Trainer, world)
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
		if err != nil {
			return err
		}
		loader, err := data.NewDataLoader(ds, data.BatchSize(batch), data.WithSampler(sampler))
		if err != nil {
			return err
		}
		m, err := gpt2.New(tensor.NewRNG(3), gpt2.Config{VocabSize: vocab, BlockSize: T, Layers: 2, Heads: 2, Embd: 16})
		if err != nil {
			return err
		}
		model, err := ddp.Wrap(ctx, m, pg)
		if err != nil {
			return err
		}
		t.Cleanup(func() { model.Close() })
		oc := optim.DefaultAdamW()
		oc.LR = 1e-2
		opt, err := optim.NewAdamW(model.Parameters(), oc)
		if err != nil {
			return err
		}
		cfg := Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
			GPUID: r, BatchSize: batch, MaxSteps: 3, GradAccum: accum, Out: &bytes.Buffer{},
			Loss: func(logits *autograd.Variable, b data.Batch) *autograd.Variable { return m.Loss(logits, b.Targets) },
			Callbacks: []Callback{Funcs{Step: func(_ context.Context, _ *Trainer, s StepInfo) error {
				losses[r] = append(losses[r], s.Loss)
				return nil
			}}}}
		if scaled {
			if cfg.Scaler, err = amp.NewGradScaler(scalerCfg, amp.WithGroup(pg)); err != nil {
				return err
			}
		}
		if fused {
			cfg.ForwardLoss = func(idx *autograd.Variable, b data.Batch) *autograd.Variable {
				calls[r]++
				return m.ForwardLoss(idx, b.Targets)
			}
		}
		if trs[r], err = New(ctx, cfg); err != nil {
			return err
		}
		return trs[r].Train(ctx, 10)
	})
	t.Cleanup(func() {
		for _, tr := range trs {
			tr.Close()
		}
	})
	return losses, calls
}

// A model's fused ForwardLoss trains to the same losses, bit for bit, as
// Forward then Loss (the step's loss of each rank at each of 3 steps, so
// the gradients and the optimizer's steps matched too), with and without
// gradient accumulation (no_sync micro-batches) and a GradScaler, and the
// trainer calls it for every micro-batch instead of Forward. The fused
// runs recycle blocks poisoned with NaN, so a value read after the step's
// BackwardAndFree gave it back would change their losses.
func TestForwardLossTrainsAsForwardThenLoss(t *testing.T) {
	for _, c := range []struct {
		accum  int
		scaled bool
		micro  int // ForwardLoss calls a rank
	}{
		// 3 micro-batches a rank an epoch: accum 2 steps on two, then on
		// the short group of one, then on two of the next epoch.
		{1, false, 3}, {2, false, 5}, {2, true, 5},
	} {
		accum := c.accum
		t.Cleanup(func() { tensor.Host().SetPoison(false) })
		plain, none := gpt2Run(t, false, accum, c.scaled)
		tensor.Host().SetPoison(true)
		fused, calls := gpt2Run(t, true, accum, c.scaled)
		tensor.Host().SetPoison(false)
		require.Equal(t, [world]int{}, none)
		require.Len(t, plain[0], 3, "accum %d scaler %v: three steps", accum, c.scaled)
		require.Equal(t, plain, fused, "accum %d scaler %v: the step losses of Forward then Loss, and of ForwardLoss", accum, c.scaled)
		require.Equal(t, [world]int{c.micro, c.micro}, calls, "accum %d scaler %v: ForwardLoss calls per rank", accum, c.scaled)
		for r := range world {
			for s, l := range plain[r] {
				require.False(t, math.IsNaN(l) || math.IsInf(l, 0), "accum %d scaler %v: rank %d step %d: loss %v", accum, c.scaled, r, s+1, l)
			}
		}
		require.NotEqual(t, plain[0][0], plain[0][2], "accum %d scaler %v: the steps trained", accum, c.scaled)
	}
}

// ForwardLoss runs in the built-in step, so a Config with Step too is
// refused.
func TestForwardLossWithStepRefused(t *testing.T) {
	c := tutorialJob(t, context.Background(), commtest.NewGroups(1)[0], 0)
	c.Loss = mse
	c.ForwardLoss = func(x *autograd.Variable, b data.Batch) *autograd.Variable { return nil }
	c.Step = func(context.Context, data.Batch) (float64, error) { return 0, nil }
	_, err := New(context.Background(), c)
	require.ErrorContains(t, err, "ForwardLoss and Step")
}
