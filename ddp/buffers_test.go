package ddp

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// BatchNorm's buffers, num_batches_tracked an int64 as in torch, are
// broadcast from rank 0 at Wrap and before every forward (broadcast_buffers).
func TestBroadcastBuffersWithInt64Counter(t *testing.T) {
	ctx := context.Background()
	var after [2][]float64
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		bn := nn.NewBatchNorm1d(3)
		bn.NumBatchesTracked.I64()[0] = int64(100 * (rank + 1)) // ranks disagree
		bn.RunningMean.F32()[1] = float32(rank + 1)
		m, err := Wrap(ctx, nn.NewSequential(bn), pg)
		if err != nil {
			return err
		}
		defer m.Close()
		if got := bn.NumBatchesTracked.I64()[0]; got != 100 {
			return fmt.Errorf("rank %d: num_batches_tracked %d after Wrap, want rank 0's 100", rank, got)
		}
		bn.NumBatchesTracked.I64()[0] = int64(1000 * (rank + 1))
		x := tensor.Rand(tensor.NewRNG(7), tensor.Float32, 4, 3) // the same batch: running stats then agree too
		if _, err := m.Forward(autograd.Const(x)); err != nil {
			return err
		}
		after[rank] = []float64{bn.NumBatchesTracked.Item(), float64(bn.RunningMean.F32()[1])}
		return nil
	})
	requireNoErrs(t, errs)
	// rank 0's 1000, broadcast, then counted once by the forward.
	require.Equal(t, []float64{1001, after[0][1]}, after[1])
	require.Equal(t, after[0], after[1])
	require.Equal(t, tensor.Int64, nn.NewBatchNorm2d(2).NumBatchesTracked.DType())
}
