package trainer

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

var crossEntropy LossFunc = func(out *autograd.Variable, b data.Batch) *autograd.Variable {
	return autograd.CrossEntropy(out, b.Labels, autograd.ReductionMean)
}

// labeled is n samples of 4 features with a class in [0, 3) drawn from seed.
func labeled(t *testing.T, seed uint64, n int) *data.TensorDataset {
	rng := tensor.NewRNG(seed)
	x := tensor.Rand(rng, tensor.Float32, n, 4)
	labels := make([]int, n)
	for i, v := range rng.RandInt(0, 3, n) {
		labels[i] = int(v)
	}
	ds, err := data.NewLabeledDataset(x, labels)
	require.NoError(t, err)
	return ds
}

// The test accuracy and loss rank 0 prints are those of the whole eval set
// computed by one process, although each rank saw only its unpadded share
// (101 samples: 51 and 50) in batches that do not divide it.
func TestEvalMetricsAreGlobal(t *testing.T) {
	ctx := context.Background()
	train, eval := labeled(t, 3, 64), labeled(t, 4, 101)
	pgs := commtest.NewGroups(world, commtest.WithTimeout(time.Minute))
	trainers := make([]*Trainer, world)
	outs := make([]*bytes.Buffer, world)
	onRanks(t, pgs, func(r int, pg backend.ProcessGroup) error {
		rng := tensor.NewRNG(1)
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
		model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 4, 3), pg)
		if err != nil {
			return err
		}
		t.Cleanup(func() { model.Close() })
		opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.5})
		if err != nil {
			return err
		}
		outs[r] = &bytes.Buffer{}
		trainers[r], err = New(ctx, Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt,
			GPUID: r, BatchSize: 8, Loss: crossEntropy, Out: outs[r], EvalData: evalLoader})
		if err != nil {
			return err
		}
		return trainers[r].Train(ctx, 2)
	})

	// One process over the whole eval set with rank 0's trained model.
	m := trainers[0].model.Module()
	var correct int
	var lossSum float64
	nn.NoGrad(m, func() {
		b := data.Batch{Inputs: tensor.New(tensor.Float32, 101, 4), Labels: make([]int, 101)}
		for i := range 101 {
			s, err := eval.Get(i)
			require.NoError(t, err)
			copy(b.Inputs.F32()[4*i:4*i+4], s.Input.Contiguous().F32())
			b.Labels[i] = s.Label
		}
		out := m.Forward(autograd.Const(b.Inputs))
		lossSum = crossEntropy(out, b).Value.Item() * 101
		for i, p := range tensor.ArgMax(out.Value, 1) {
			if p == b.Labels[i] {
				correct++
			}
		}
	})
	want := float64(correct) / 101

	lines := regexp.MustCompile(`epoch=1 test_loss=([0-9.]+) test_acc=([0-9.]+)`).FindStringSubmatch(outs[0].String())
	require.NotNil(t, lines, "rank 0 printed no eval line for the last epoch:\n%s", outs[0])
	gotLoss, _ := strconv.ParseFloat(lines[1], 64)
	gotAcc, _ := strconv.ParseFloat(lines[2], 64)
	require.InDelta(t, want, gotAcc, 5e-5, "global accuracy: %d/101 correct", correct)
	require.InDelta(t, lossSum/101, gotLoss, 5e-5)
	require.NotContains(t, outs[1].String(), "test_acc=", "only rank 0 prints the global figure")
}
