package commtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

// The in-memory group runs the part of the table it implements, which
// checks the table's expectations as much as the group.
func TestGroupRunsTheTable(t *testing.T) {
	for _, world := range []int{1, 2, 4} {
		var cases []Case
		for _, c := range Cases(world, []int{0, 1, 7, 1000}, 10_001) {
			if slices.Contains([]string{"allreduce", "broadcast", "allgather", "barrier"}, c.Op) {
				cases = append(cases, c)
			}
		}
		require.Greater(t, len(cases), 100)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		hashes := make([][]uint64, world)
		errs := Run(NewGroups(world), func(pg backend.ProcessGroup) error {
			h, err := RunCases(ctx, pg, cases)
			hashes[pg.Rank()] = h
			return err
		})
		cancel()
		for r, err := range errs {
			require.NoError(t, err, "world %d rank %d", world, r)
		}
		for i, c := range cases {
			if c.Op == "allreduce" || c.Op == "broadcast" || c.Op == "allgather" {
				for r := 1; r < world; r++ {
					require.Equal(t, hashes[0][i], hashes[r][i], "%v: rank %d differs from rank 0", c, r)
				}
			}
		}
	}
}

// A wrong result is caught: RunCase is not a check that cannot fail.
func TestRunCaseCatchesWrongResults(t *testing.T) {
	pg := &wrongGroup{NewGroups(1)[0]}
	_, err := RunCase(context.Background(), pg, Case{Op: "allreduce", DType: backend.Float32, N: 5, ReduceOp: backend.Sum})
	require.ErrorContains(t, err, "element 0")
}

// wrongGroup adds one to the first element of every all-reduce.
type wrongGroup struct{ backend.ProcessGroup }

func (g *wrongGroup) AllReduce(buf backend.Buffer, op backend.ReduceOp) backend.Work {
	if err := g.ProcessGroup.AllReduce(buf, op).Wait(context.Background()); err != nil {
		return backend.FailedFuture(err)
	}
	view[float32](buf)[0]++
	return backend.FailedFuture(nil)
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s := NewStore()
	got := make(chan []byte)
	go func() {
		v, _ := s.Get(ctx, "k")
		got <- v
	}()
	require.NoError(t, s.Set(ctx, "k", []byte("v")))
	require.Equal(t, []byte("v"), <-got)
	n, err := s.Add(ctx, "n", 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Wait(short, "missing"), context.DeadlineExceeded)
}
