package autograd

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// A single replica's SyncBatchNorm is BatchNorm in training: it must match
// torch's batch_norm fixtures for the training cases.
func TestSyncBatchNormOneReplicaFixture(t *testing.T) {
	runFixture(t, "batch_norm2d", batchNormCase(true))
}

func TestSyncBatchNormGradCheck(t *testing.T) {
	alone := func([]float64) error { return nil }
	gradCheck(t, func(xs []*Variable) *Variable { return SyncBatchNorm(xs[0], xs[1], xs[2], nil, nil, 0.1, 1e-5, alone) },
		randT(1, 1.5, 0.3, 3, 2, 3, 2), randT(2, 0.3, 1, 2), randT(3, 0.2, 0, 2))
}

// pairSum returns two SumAcrossReplicas that meet: each call blocks until
// the other replica's matching call arrives, then both get the sum.
func pairSum() [2]SumAcrossReplicas {
	var mu sync.Mutex
	var pending []float64
	var ready chan []float64
	mk := func() SumAcrossReplicas {
		return func(buf []float64) error {
			mu.Lock()
			if pending == nil {
				pending, ready = buf, make(chan []float64, 1)
				ch := ready
				mu.Unlock()
				other := <-ch
				for i := range buf {
					buf[i] += other[i]
				}
				return nil
			}
			first, ch := pending, ready
			pending, ready = nil, nil
			mine := append([]float64(nil), buf...)
			for i := range buf {
				buf[i] += first[i]
			}
			mu.Unlock()
			ch <- mine
			return nil
		}
	}
	return [2]SumAcrossReplicas{mk(), mk()}
}

// TestSyncBatchNormTwoReplicasMatchesConcatenatedBatch: two replicas, each
// with half of a batch (3 and 2 samples: uneven), produce exactly what one
// BatchNorm over the whole batch does: the outputs, the input gradients,
// the running statistics, and weight/bias gradients that sum to the
// single-process ones.
func TestSyncBatchNormTwoReplicasMatchesConcatenatedBatch(t *testing.T) {
	const c = 3
	x := randT(11, 1.3, 0.4, 5, c, 4, 3)
	gy := randT(12, 1, 0, 5, c, 4, 3)
	w0, b0 := randT(13, 0.3, 1, c), randT(14, 0.2, 0, c)
	rm0, rv0 := randT(15, 0.1, 0, c), absShift(randT(16, 0.2, 0, c), 0.8)

	// Reference: one process, the whole batch.
	xw, ww, bw := Param(x.Clone()), Param(w0.Clone()), Param(b0.Clone())
	rm, rv := rm0.Clone(), rv0.Clone()
	yRef := BatchNorm(xw, ww, bw, rm, rv, true, 0.1, 1e-5)
	require.NoError(t, yRef.BackwardWith(gy))

	split := [2][2]int{{0, 3}, {3, 5}}
	sums := pairSum()
	type result struct {
		y, dx, dw, db, rm, rv *tensor.Tensor
	}
	var res [2]result
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			lo, hi := split[r][0], split[r][1]
			xr := Param(tensor.IndexSelect(x, 0, seq(lo, hi)))
			wr, br := Param(w0.Clone()), Param(b0.Clone())
			rmr, rvr := rm0.Clone(), rv0.Clone()
			y := SyncBatchNorm(xr, wr, br, rmr, rvr, 0.1, 1e-5, sums[r])
			if err := y.BackwardWith(tensor.IndexSelect(gy, 0, seq(lo, hi))); err != nil {
				panic(err)
			}
			res[r] = result{y.Value, xr.Grad, wr.Grad, br.Grad, rmr, rvr}
		}(r)
	}
	wg.Wait()
	for r := range 2 {
		lo, hi := split[r][0], split[r][1]
		want := func(t0 *tensor.Tensor) fixTensor {
			s := tensor.IndexSelect(t0, 0, seq(lo, hi))
			return fixTensor{Shape: s.Shape(), Data: toF64(s)}
		}
		requireClose(t, want(yRef.Value), res[r].y, 1e-10, 1e-9, "output")
		requireClose(t, want(xw.Grad), res[r].dx, 1e-10, 1e-9, "input gradient")
		requireClose(t, fixTensor{Shape: []int{c}, Data: toF64(rm)}, res[r].rm, 1e-12, 1e-10, "running mean")
		requireClose(t, fixTensor{Shape: []int{c}, Data: toF64(rv)}, res[r].rv, 1e-12, 1e-10, "running var")
	}
	sumOf := func(a, b *tensor.Tensor) *tensor.Tensor { return tensor.Add(a, b) }
	requireClose(t, fixTensor{Shape: []int{c}, Data: toF64(ww.Grad)}, sumOf(res[0].dw, res[1].dw), 1e-10, 1e-9, "weight gradient summed over replicas")
	requireClose(t, fixTensor{Shape: []int{c}, Data: toF64(bw.Grad)}, sumOf(res[0].db, res[1].db), 1e-10, 1e-9, "bias gradient summed over replicas")
}

func seq(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}
