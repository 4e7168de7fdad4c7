package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// SumAcrossReplicas sums buf elementwise across every replica of a
// distributed job, in place (an all-reduce with Sum). SyncBatchNorm calls it
// once in forward and once in backward; every replica must take part in the
// same calls, in the same order.
type SumAcrossReplicas func(buf []float64) error

// SyncBatchNorm is BatchNorm in training mode with the batch statistics of
// every replica together, as torch.nn.SyncBatchNorm: forward all-reduces
// each channel's sum, sum of squares and count, so the mean and (biased)
// variance are those of the concatenated batch, and the running statistics
// are updated from them (the unbiased variance uses the global count).
// Backward all-reduces each channel's sum(gy) and sum(gy*xhat) for the input
// gradient; the weight and bias gradients stay local, as in torch (DDP
// averages them). x is [N, C, *]; w, b ([C]) and the running statistics may
// be nil. A failed all-reduce panics with the error: forward and backward
// have no error result, and the replicas can no longer agree.
//
// It is BatchNorm's op (batch_norm.go) with the sums ([Σx | Σx² | count]
// in forward, [Σgy | Σgy·xhat] in backward: 2C+1 and 2C values) summed
// across replicas in between.
func SyncBatchNorm(x, w, b *Variable, runMean, runVar *tensor.Tensor, momentum, eps float64, sum SumAcrossReplicas) *Variable {
	n, c, l := checkBatchNorm("SyncBatchNorm", x, w, b, runMean, runVar)
	xs := x.Value.Shape()
	fwd := stagedSum(sum, func(buf []float64) error {
		if cnt := buf[len(buf)-1]; cnt <= 1 {
			return fmt.Errorf("expected more than 1 value per channel across all replicas when training, got %v (local input %v)", cnt, xs)
		}
		return nil
	})
	return batchNorm("SyncBatchNorm", x, w, b, runMean, runVar, n, c, l, true, momentum, eps, fwd, stagedSum(sum, nil))
}

// stagedSum sums a tensor of sums across replicas in place with sum,
// through a float64 host buffer, then runs check (nil: none) on the sums.
// It reads host memory because SumAcrossReplicas takes a []float64 (every
// backend, tcp, shm or nccl, can reduce it): a copy each way of a few
// hundred bytes per layer, off a device.
func stagedSum(sum SumAcrossReplicas, check func([]float64) error) func(*tensor.Tensor) error {
	return func(t *tensor.Tensor) error {
		buf, err := tensor.Float64s(t)
		if err != nil {
			return err
		}
		if err := sum(buf); err != nil {
			return fmt.Errorf("all-reduce of the batch statistics: %w", err)
		}
		if check != nil {
			if err := check(buf); err != nil {
				return err
			}
		}
		return tensor.CopyFloat64s(t, buf)
	}
}
