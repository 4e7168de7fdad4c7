package trainer

import (
	"bytes"
	"context"
	"math"
	"runtime"
	"runtime/debug"
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

// peakMode is how gpt2PeakBytes trains: the trainer's step with Forward
// then Loss or with ForwardLoss, or ForwardLoss by hand under Backward
// then FreeGraph (the trainer's step before BackwardAndFree).
type peakMode int

const (
	peakPlain peakMode = iota
	peakFused
	peakFusedBackward
)

// gpt2PeakBytes trains a tiny GPT-2 whose logits dwarf its activations
// (vocabulary 2048, width 32, 2 layers; 8 sequences of 32 tokens a batch:
// logits [256, 2048], 2 MiB) for 2 steps at world 1, AdamW, as mode says,
// and returns the host allocator's peak bytes over those in use when
// training began, and the logits' bytes.
func gpt2PeakBytes(t *testing.T, mode peakMode) (peak, logits int64) {
	t.Helper()
	ctx := context.Background()
	const n, T, vocab, batch = 16, 32, 2048, 8
	in, tg := make([]int, n*T), make([]int, n*T)
	for i := range in {
		in[i], tg[i] = (i*37)%vocab, (i*37+5)%vocab
	}
	ds, err := data.NewTensorDataset(tensor.FromInts(in, n, T), tensor.FromInts(tg, n, T))
	require.NoError(t, err)
	pg := commtest.NewGroups(1, commtest.WithTimeout(time.Minute))[0]
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg), data.SamplerSeed(1))
	require.NoError(t, err)
	loader, err := data.NewDataLoader(ds, data.BatchSize(batch), data.WithSampler(sampler))
	require.NoError(t, err)
	m, err := gpt2.New(tensor.NewRNG(3), gpt2.Config{VocabSize: vocab, BlockSize: T, Layers: 2, Heads: 2, Embd: 32})
	require.NoError(t, err)
	model, err := ddp.Wrap(ctx, m, pg)
	require.NoError(t, err)
	t.Cleanup(func() { model.Close() })
	opt, err := optim.NewAdamW(model.Parameters(), optim.DefaultAdamW())
	require.NoError(t, err)
	cfg := Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
		BatchSize: batch, Out: &bytes.Buffer{},
		Loss: func(logits *autograd.Variable, b data.Batch) *autograd.Variable { return m.Loss(logits, b.Targets) }}
	if mode == peakFused {
		cfg.ForwardLoss = func(idx *autograd.Variable, b data.Batch) *autograd.Variable { return m.ForwardLoss(idx, b.Targets) }
	}
	tr, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	// Tensors of earlier tests that are garbage now would go back to the
	// allocator (runtime cleanups) during the run, lowering its count under
	// the base: they go first, and no collection runs while measuring, so
	// the figures do not depend on when one would.
	runtime.GC()
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	h := tensor.Host()
	h.ResetPeak()
	base := h.Stats().Allocated
	if mode != peakFusedBackward {
		require.NoError(t, tr.Train(ctx, 1))
	} else {
		for s := range n / batch {
			rows := s * batch * T
			idx := autograd.Const(tensor.FromInts(in[rows:rows+batch*T], batch, T))
			y := tensor.FromInts(tg[rows:rows+batch*T], batch, T)
			opt.ZeroGrad()
			loss, err := model.ForwardFunc(func() *autograd.Variable { return m.ForwardLoss(idx, y) })
			require.NoError(t, err)
			require.NoError(t, loss.Backward())
			loss.FreeGraph()
			require.NoError(t, opt.Step())
		}
	}
	return h.Stats().PeakAllocated - base, batch * T * vocab * 4
}

// The trainer's step with ForwardLoss holds one logits-sized tensor less
// at its peak than with Forward then Loss (those hold the logits and the
// loss's softmax at once; the fused loss's softmax takes the logits'
// block), and one less than ForwardLoss under Backward then FreeGraph
// (there the loss's gradient is a new tensor beside the softmax; under
// the step's BackwardAndFree it is written over it). Bytes are the host
// allocator's, counted exactly.
func TestForwardLossStepPeak(t *testing.T) {
	plain, logits := gpt2PeakBytes(t, peakPlain)
	fused, _ := gpt2PeakBytes(t, peakFused)
	unfreed, _ := gpt2PeakBytes(t, peakFusedBackward)
	t.Logf("peak over the start: %d bytes with Forward then Loss, %d with ForwardLoss, %d with ForwardLoss under Backward then FreeGraph (logits %d)",
		plain, fused, unfreed, logits)
	require.LessOrEqual(t, fused, plain-logits*3/4, "ForwardLoss's step peak against Forward then Loss's")
	require.LessOrEqual(t, fused, unfreed-logits*3/4, "the step's peak against Backward then FreeGraph's")
}
