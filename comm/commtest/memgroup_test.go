package commtest_test

import (
	"context"
	"github.com/goddp/goddp/internal/half"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
)

func TestGroupCollectives(t *testing.T) {
	tests := []struct {
		name string
		run  func(rank int, pg comm.ProcessGroup) error
	}{
		{"allreduce sum f32", func(rank int, pg comm.ProcessGroup) error {
			x := []float32{float32(rank), 1}
			if err := pg.AllReduce(comm.Float32s(x), comm.Sum).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, []float32{3, 3}, x)
			return nil
		}},
		{"allreduce max i64", func(rank int, pg comm.ProcessGroup) error {
			x := []int64{int64(rank), -int64(rank)}
			if err := pg.AllReduce(comm.Int64s(x), comm.Max).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, []int64{2, 0}, x)
			return nil
		}},
		{"allreduce avg f64", func(rank int, pg comm.ProcessGroup) error {
			x := []float64{float64(rank)}
			if err := pg.AllReduce(comm.Float64s(x), comm.Avg).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, []float64{1}, x)
			return nil
		}},
		{"allreduce f16", func(rank int, pg comm.ProcessGroup) error {
			x := []uint16{half.F32ToF16(0.5 * float32(rank+1))}
			if err := pg.AllReduce(comm.Float16s(x), comm.Sum).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, float32(3), half.F16ToF32(x[0]))
			return nil
		}},
		{"broadcast", func(rank int, pg comm.ProcessGroup) error {
			x := []int32{int32(rank), int32(rank)}
			if err := pg.Broadcast(comm.Int32s(x), 1).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, []int32{1, 1}, x)
			return nil
		}},
		{"allgather and barrier", func(rank int, pg comm.ProcessGroup) error {
			out := make([]float32, 3)
			if err := comm.AllGather(pg, comm.Float32s(out), comm.Float32s([]float32{float32(rank)})).Wait(context.Background()); err != nil {
				return err
			}
			assert.Equal(t, []float32{0, 1, 2}, out)
			return pg.Barrier().Wait(context.Background())
		}},
		{"mismatch fails on every rank", func(rank int, pg comm.ProcessGroup) error {
			x := make([]float32, 1+rank%2)
			err := pg.AllReduce(comm.Float32s(x), comm.Sum).Wait(context.Background())
			assert.ErrorIs(t, err, comm.ErrBadArgument)
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { requireNoErrs(t, runRanks(3, tc.run)) })
	}
}

func TestGroupTimeoutAndClose(t *testing.T) {
	pgs := commtest.NewGroups(2, commtest.WithTimeout(50*time.Millisecond))
	err := pgs[0].AllReduce(comm.Float32s([]float32{1}), comm.Sum).Wait(context.Background())
	require.ErrorIs(t, err, comm.ErrTimeout)
	assert.ErrorContains(t, err, "waiting for ranks [1]")

	pgs = commtest.NewGroups(2)
	w := pgs[0].AllReduce(comm.Float32s([]float32{1}), comm.Sum)
	require.NoError(t, pgs[1].Close())
	assert.ErrorIs(t, w.Wait(context.Background()), comm.ErrPeerFailed)
	assert.ErrorIs(t, pgs[1].Barrier().Wait(context.Background()), comm.ErrClosed)
	assert.ErrorIs(t, pgs[0].Barrier().Wait(context.Background()), comm.ErrPeerFailed)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pgs = commtest.NewGroups(2)
	assert.ErrorIs(t, pgs[0].Barrier().Wait(ctx), context.Canceled)
}

func TestGroupRunsInIssueOrder(t *testing.T) {
	errs := runRanks(2, func(rank int, pg comm.ProcessGroup) error {
		var ws []comm.Work
		for i := 0; i < 20; i++ {
			ws = append(ws, pg.AllReduce(comm.Float32s([]float32{1}), comm.Sum))
		}
		for i, w := range ws {
			if err := w.Wait(context.Background()); err != nil {
				return err
			}
			// Earlier ops are complete whenever a later one is.
			for _, prev := range ws[:i] {
				assert.True(t, prev.IsCompleted())
			}
		}
		return nil
	}, commtest.WithLatency(100*time.Microsecond))
	requireNoErrs(t, errs)
}

func runRanks(n int, fn func(rank int, pg comm.ProcessGroup) error, opts ...commtest.Option) []error {
	pgs := commtest.NewGroups(n, append([]commtest.Option{commtest.WithTimeout(20 * time.Second)}, opts...)...)
	return commtest.Run(pgs, func(pg comm.ProcessGroup) error { return fn(pg.Rank(), pg) })
}

func requireNoErrs(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
