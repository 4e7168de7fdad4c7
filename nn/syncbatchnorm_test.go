package nn_test

import (
	"sync"
	"testing"

	"github.com/goddp/goddp/comm/commtest"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// TestSyncBatchNormWorld2MatchesConcatenatedBatch: a model converted with
// ConvertSyncBatchNorm, run on two ranks of an in-memory process group with
// half of a batch each, gives each rank the output and input gradient that
// one BatchNorm2d over the whole batch gives that half, the same running
// statistics on both ranks, and weight gradients that sum to the
// single-process ones.
func TestSyncBatchNormWorld2MatchesConcatenatedBatch(t *testing.T) {
	const c = 4
	x := tensor.Randn(tensor.NewRNG(5), tensor.Float32, 6, c, 3, 5)
	gy := tensor.Randn(tensor.NewRNG(6), tensor.Float32, 6, c, 3, 5)

	ref := nn.NewBatchNorm2d(c)
	xr := autograd.Param(x.Clone())
	yRef := ref.Forward(xr)
	require.NoError(t, yRef.BackwardWith(gy))

	pgs := commtest.NewGroups(2)
	halves := [2][]int{{0, 1, 2}, {3, 4, 5}}
	type out struct {
		y, dx, dw, db, rm, rv *tensor.Tensor
		nbt                   float64
	}
	var res [2]out
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			model := nn.ConvertSyncBatchNorm(nn.NewSequential(nn.NewBatchNorm2d(c), nn.NewReLU()), pgs[r])
			sbn, ok := model.At(0).(*nn.SyncBatchNorm)
			if !ok {
				panic("layer 0 was not converted")
			}
			xi := autograd.Param(tensor.IndexSelect(x, 0, halves[r]))
			y := sbn.Forward(xi)
			if err := y.BackwardWith(tensor.IndexSelect(gy, 0, halves[r])); err != nil {
				panic(err)
			}
			res[r] = out{y.Value, xi.Grad, sbn.Weight.Grad, sbn.Bias.Grad, sbn.RunningMean, sbn.RunningVar, sbn.NumBatchesTracked.Item()}
		}(r)
	}
	wg.Wait()
	close := func(want, got *tensor.Tensor, what string) {
		t.Helper()
		w, g := want.Contiguous().F32(), got.Contiguous().F32()
		require.Len(t, g, len(w), what)
		for i := range w {
			require.InDelta(t, w[i], g[i], 1e-5+1e-4*float64(abs32(w[i])), "%s element %d", what, i)
		}
	}
	for r := range 2 {
		close(tensor.IndexSelect(yRef.Value, 0, halves[r]), res[r].y, "output")
		close(tensor.IndexSelect(xr.Grad, 0, halves[r]), res[r].dx, "input gradient")
		close(ref.RunningMean, res[r].rm, "running mean")
		close(ref.RunningVar, res[r].rv, "running var")
		require.Equal(t, 1.0, res[r].nbt)
	}
	close(ref.Weight.Grad, tensor.Add(res[0].dw, res[1].dw), "weight gradient summed over ranks")
	close(ref.Bias.Grad, tensor.Add(res[0].db, res[1].db), "bias gradient summed over ranks")
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func TestConvertSyncBatchNormKeepsStateAndKeys(t *testing.T) {
	pg := commtest.NewGroups(1)[0]
	inner := &nn.Container{}
	inner.RegisterModule("bn", nn.NewBatchNorm1d(3))
	model := nn.NewSequential(nn.NewConv2d(tensor.NewRNG(1), 1, 2, 3), nn.NewBatchNorm2d(2))
	model.Append(nn.NewFlatten())
	top := &nn.Container{}
	top.RegisterModule("features", model)
	top.RegisterModule("head", inner)
	bn2 := model.At(1).(*nn.BatchNorm2d)
	before := nn.StateDict(top).Keys()

	got := nn.ConvertSyncBatchNorm(top, pg)
	require.Same(t, top, got)
	require.Equal(t, before, nn.StateDict(top).Keys(), "state dict keys unchanged")
	s, ok := model.At(1).(*nn.SyncBatchNorm)
	require.True(t, ok)
	require.Same(t, bn2.Weight, s.Weight, "parameters shared")
	require.Same(t, bn2.RunningVar, s.RunningVar, "buffers shared")
	_, ok = inner.NamedChildren()[0].Module.(*nn.SyncBatchNorm)
	require.True(t, ok, "nested container converted")
	single := nn.SyncBatchNormFrom(nn.NewBatchNorm1d(2), pg)
	require.NotNil(t, single)
	require.PanicsWithValue(t, "nn: ConvertSyncBatchNorm of a *nn.BatchNorm2d: a BatchNorm itself cannot become a SyncBatchNorm in place; use SyncBatchNormFrom",
		func() { nn.ConvertSyncBatchNorm(nn.NewBatchNorm2d(2), pg) })
	// The result keeps its type: a *Sequential goes to ddp.Wrap as it is.
	var seq *nn.Sequential = nn.ConvertSyncBatchNorm(nn.NewSequential(nn.NewBatchNorm1d(2)), pg)
	_, ok = seq.At(0).(*nn.SyncBatchNorm)
	require.True(t, ok)
	// A group of one is plain BatchNorm.
	y := s.Forward(autograd.Const(tensor.Randn(tensor.NewRNG(1), tensor.Float32, 2, 2, 3, 3)))
	require.Equal(t, []int{2, 2, 3, 3}, y.Value.Shape())
}
