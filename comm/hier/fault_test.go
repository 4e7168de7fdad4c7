package hier_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/hier"
)

// A rank that leaves in the middle of an all-reduce is named, by global
// rank and node, in every survivor's error: by those that share a
// sub-group with it, whose sub-group numbers it otherwise (the shm group
// by local index, the tcp group by node), and by those that only saw a
// partner give up after it (rank 0 below meets rank 2 across hosts, never
// rank 3 itself). Both the latency path and the pipelined one.
func TestLeavingRankNamed(t *testing.T) {
	for _, c := range []struct {
		top    topology
		victim int
	}{
		{topologies[0], 3}, // 2x2 contiguous: rank 3 is node 1's local rank 1
		{topologies[1], 4}, // 3 nodes x2 interleaved: rank 4 is node 1's local rank 1
	} {
		for _, n := range []int{16, 1 << 17} {
			t.Run(fmt.Sprintf("%s/rank %d/%d floats", c.top.name, c.victim, n), func(t *testing.T) {
				errs := leaveDuringAllReduce(t, c.top, c.victim, n)
				node := fmt.Sprintf("rank %d (node 1, host %q)", c.victim, c.top.host(c.victim))
				for r, err := range errs {
					if r == c.victim {
						continue
					}
					require.ErrorIs(t, err, backend.ErrPeerFailed, "rank %d", r)
					require.ErrorContains(t, err, node, "rank %d", r)
					var oe *backend.OpError
					require.True(t, errors.As(err, &oe), "rank %d: %v", r, err)
					require.Equal(t, r, oe.Rank, "rank %d reports as itself: %v", r, err)
					require.NotEmpty(t, oe.Peers, "rank %d: %v", r, err)
					require.Equal(t, c.victim, oe.Peers[0], "rank %d blames another rank first: %v", r, err)
				}
			})
		}
	}
}

// leaveDuringAllReduce runs an all-reduce of n floats on every rank but
// victim, which closes its group instead while the others wait in it.
func leaveDuringAllReduce(t *testing.T, top topology, victim, n int) []error {
	t.Helper()
	st := commtest.NewStore()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make([]error, top.world)
	var wg sync.WaitGroup
	for r := range top.world {
		wg.Go(func() {
			g, err := hier.NewWithConfig(ctx, backend.Options{Rank: r, Size: top.world, Store: st, Prefix: "t",
				Timeout: 20 * time.Second, StallThreshold: -1}, hier.Config{Host: top.host(r), SmallBytes: 1024, SegmentBytes: 64 << 10})
			if err != nil {
				errs[r] = fmt.Errorf("rank %d setup: %w", r, err)
				return
			}
			if r == victim {
				// Give the others time to enter the collective; if one has
				// not yet, it fails the same way on entering.
				time.Sleep(300 * time.Millisecond)
				errs[r] = g.Close()
				return
			}
			defer g.Close()
			errs[r] = g.AllReduce(backend.Float32s(make([]float32, n)), backend.Sum).Wait(ctx)
		})
	}
	wg.Wait()
	require.NoError(t, errs[victim], "closing rank %d", victim)
	return errs
}
