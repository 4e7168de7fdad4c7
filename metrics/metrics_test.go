package metrics_test

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/metrics"
)

// TestReduceWeightsRanksBySampleCount: rank 0 saw 3 samples, rank 1 saw 1
// (an unpadded shard); the reduced metrics are those of all 4 samples, not
// the mean of the two ranks' means.
func TestReduceWeightsRanksBySampleCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pgs := commtest.NewGroups(2)
	type got struct{ mean, acc float64 }
	var res [2]got
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			var m metrics.Mean
			var a metrics.Accuracy
			if r == 0 {
				m.Add(1.0, 3) // three samples with loss 1
				a.Add([]int{1, 2, 3}, []int{1, 2, 0})
			} else {
				m.Add(5.0, 1)
				a.Add([]int{4}, []int{4})
			}
			mean, err := m.Reduce(ctx, pgs[r])
			require.NoError(t, err)
			acc, err := a.Reduce(ctx, pgs[r])
			require.NoError(t, err)
			res[r] = got{mean, acc}
		}(r)
	}
	wg.Wait()
	for r := range 2 {
		require.InDelta(t, (3*1.0+5.0)/4, res[r].mean, 1e-12)
		require.InDelta(t, 3.0/4, res[r].acc, 1e-12)
	}
}

func TestAllReduceSumFailsOnClosedGroup(t *testing.T) {
	pgs := commtest.NewGroups(2)
	require.NoError(t, pgs[0].Close())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := metrics.AllReduceSum(ctx, pgs[0], 1, 2)
	require.Error(t, err)
	require.Contains(t, err.Error(), "rank 0 of 2")
}

func ExampleAccuracy() {
	pg := commtest.NewGroups(1)[0] // in a job: comm.InitFromEnv(ctx)
	var acc metrics.Accuracy
	acc.Add([]int{0, 1, 1, 2}, []int{0, 1, 2, 2})
	v, err := acc.Reduce(context.Background(), pg)
	fmt.Println(v, err)
	// Output: 0.75 <nil>
}
