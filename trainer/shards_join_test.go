package trainer

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// countingGroup counts all-reduces.
type countingGroup struct {
	comm.ProcessGroup
	n *atomic.Int64
}

func (g countingGroup) AllReduce(b comm.Buffer, op comm.ReduceOp) comm.Work {
	g.n.Add(1)
	return g.ProcessGroup.AllReduce(b, op)
}

// AllGather passes the optional collective the trainer uses through.
func (g countingGroup) AllGather(out, in comm.Buffer) comm.Work {
	return comm.AllGather(g.ProcessGroup, out, in)
}

// trainShards trains a linear model from 64 samples written as shards of
// perShard, at world 2, one epoch, and returns each rank's steps, the
// all-reduces rank 0 issued and both ranks' weights.
func trainShards(t *testing.T, perShard int) (steps [2]int, allReduces int64, w [2][]float32) {
	ctx := context.Background()
	rng := tensor.NewRNG(1)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 64, 4), tensor.Rand(rng, tensor.Float32, 64, 1))
	require.NoError(t, err)
	paths, err := data.WriteShards(ds, t.TempDir(), "s", perShard, data.ShardNPY)
	require.NoError(t, err)
	var count atomic.Int64
	pgs := commtest.NewGroups(2, commtest.WithTimeout(time.Minute))
	var wg sync.WaitGroup
	var errs [2]error
	for r, pg := range pgs {
		wg.Go(func() {
			if r == 0 {
				pg = countingGroup{pg, &count}
			}
			sds, err := data.OpenShards(paths, data.ShardGroup(pg), data.ShardSeed(1))
			if err != nil {
				errs[r] = err
				return
			}
			stream, err := data.NewStreamLoader(sds, data.BatchSize(8))
			if err != nil {
				errs[r] = err
				return
			}
			model, err := ddp.Wrap(ctx, nn.NewLinear(tensor.NewRNG(2), 4, 1), pg)
			if err != nil {
				errs[r] = err
				return
			}
			defer model.Close()
			opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
			if err != nil {
				errs[r] = err
				return
			}
			tr, err := New(ctx, Config{Model: model, TrainStream: stream, Optimizer: opt, GPUID: r, BatchSize: 8, Loss: mse, Out: &bytes.Buffer{}})
			if err != nil {
				errs[r] = err
				return
			}
			defer tr.Close()
			if errs[r] = tr.Train(ctx, 1); errs[r] == nil {
				steps[r], w[r] = tr.step, weights(tr)
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	return steps, count.Load(), w
}

// Ranks with as many batches as each other train without Join (no
// per-step all-reduce beyond the gradients'); uneven shards still train,
// under Join, and the ranks end with the same model either way.
func TestShardsJoinOnlyWhenUneven(t *testing.T) {
	steps, even, w := trainShards(t, 8) // 8 shards of 8: 4 per rank, 4 batches each
	require.Equal(t, [2]int{4, 4}, steps)
	require.Equal(t, w[0], w[1])
	// Per step one gradient bucket; per epoch the batch-count check and the
	// stop agreement, and one more for the epoch's figures. Join would add at least one per step.
	require.LessOrEqual(t, even, int64(4+3), "all-reduces in an even epoch")

	steps, _, w = trainShards(t, 24) // shards of 24, 24, 16: 2 on one rank, 1 on the other
	require.NotEqual(t, steps[0], steps[1], "the shards deal unevenly")
	require.Equal(t, w[0], w[1], "Join keeps the ranks' models equal")
}
