package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shmWorld creates a world of shm groups, one goroutine per rank, in this
// process, and runs fn on each rank; it returns each rank's error.
func shmWorld(t *testing.T, world int, timeout time.Duration, fn func(ctx context.Context, g backend.ProcessGroup) error) []error {
	t.Helper()
	// Ranks that are goroutines must not wait for a P behind a spinning
	// rank: give each rank (and its worker) a thread of its own, so the
	// kernel schedules them as it would rank processes.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2*world+2)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store := commtest.NewStore()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := New(ctx, backend.Options{Rank: r, Size: world, Store: store, Timeout: timeout})
			if err != nil {
				errs[r] = fmt.Errorf("rank %d setup: %w", r, err)
				return
			}
			defer g.Close()
			errs[r] = fn(context.Background(), g)
		}()
	}
	wg.Wait()
	return errs
}

func shmSegmentsLeft(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(fmt.Sprintf("%s/goddp-shm-%d-*", shmDir, os.Getpid()))
	require.NoError(t, err)
	return m
}

func TestShmCollectives(t *testing.T) {
	tiny := map[string]string{
		"GODDP_SHM_SLOT_BYTES": "64K", "GODDP_SHM_CHUNK_BYTES": "4K",
		"GODDP_SHM_SMALL_MAX": "1K", "GODDP_SHM_NBUF": "2", "GODDP_SHM_CMA_MIN": "16K",
	}
	tinyNoCMA := maps.Clone(tiny)
	tinyNoCMA["GODDP_SHM_CMA_MIN"] = "0"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		lengths []int
	}{
		// Default parameters: the small path, the boundary, and a pipelined
		// large path; tiny slots: every path with many steps, cheaply.
		{"default", nil, []int{0, 1, 7, 1001}},
		{"tiny-slots", tiny, []int{0, 1, 5, 257, 3001}},
		{"tiny-slots-nocma", tinyNoCMA, []int{257, 3001}},
	} {
		for _, world := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("%s/world%d", tc.name, world), func(t *testing.T) {
				for k, v := range tc.env {
					t.Setenv(k, v)
				}
				cases := commtest.CasesFor(world, nil, tc.lengths)
				if tc.env == nil {
					cases = append(cases, commtest.CasesFor(world, []backend.DType{backend.Float32, backend.BFloat16}, []int{16385, 70001})...)
					// Larger than a slot: several steps even for the copy-through ops.
					for _, op := range []string{"allreduce", "broadcast", "allgather", "reduce"} {
						cases = append(cases, commtest.Case{Op: op, DType: backend.Float32, N: 300001, ReduceOp: backend.Sum, Root: world - 1})
					}
				}
				hashes := make([][]uint64, world)
				errs := shmWorld(t, world, 30*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
					// CMA is off by default and on where the env sets a size.
					cmaMin := tc.env["GODDP_SHM_CMA_MIN"]
					if want := world > 1 && cmaMin != "" && cmaMin != "0"; g.(*shmGroup).cma != want {
						return fmt.Errorf("single-copy enabled = %v, want %v", !want, want)
					}
					hs := make([]uint64, len(cases))
					for i, c := range cases {
						h, err := commtest.RunCase(ctx, g, c)
						if err != nil {
							return err
						}
						hs[i] = h
					}
					hashes[g.Rank()] = hs
					return nil
				})
				for r, err := range errs {
					require.NoError(t, err, "rank %d", r)
				}
				// Every rank must hold bit-identical all-reduce results.
				for i, c := range cases {
					if c.Op == "allreduce" || c.Op == "allgather" || c.Op == "broadcast" {
						for r := 1; r < world; r++ {
							require.Equal(t, hashes[0][i], hashes[r][i], "%v: rank %d differs from rank 0", c, r)
						}
					}
				}
				assert.Empty(t, shmSegmentsLeft(t))
			})
		}
	}
}

func TestShmBadArguments(t *testing.T) {
	errs := shmWorld(t, 2, 5*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		for _, w := range []backend.Work{
			backend.AllGather(g, backend.Float32s(make([]float32, 3)), backend.Float32s(make([]float32, 2))),
			backend.ReduceScatter(g, backend.Float32s(make([]float32, 2)), backend.Float64s(make([]float64, 4)), backend.Sum),
			g.Broadcast(backend.Float32s(make([]float32, 2)), 2),
			g.AllReduce(backend.Float32s(make([]float32, 2)), backend.ReduceOp(9)),
			backend.AllToAll(g, backend.Float32s(make([]float32, 3)), backend.Float32s(make([]float32, 3))),
			backend.Send(g, backend.Float32s(nil), g.Rank(), 0),
			backend.Recv(g, backend.Float32s(nil), 5, 0),
		} {
			if err := w.Wait(ctx); !errors.Is(err, backend.ErrBadArgument) && !errors.Is(err, backend.ErrUnsupported) {
				return fmt.Errorf("want a bad-argument error, got %v", err)
			}
		}
		// The group is still usable.
		x := []float32{1, 2}
		if err := g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx); err != nil {
			return err
		}
		if x[0] != 2 || x[1] != 4 {
			return fmt.Errorf("got %v", x)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestShmMismatchedCollectives(t *testing.T) {
	errs := shmWorld(t, 2, 2*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		x := make([]float32, 8)
		if g.Rank() == 0 {
			return g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx)
		}
		return g.AllReduce(backend.Float32s(x[:4]), backend.Max).Wait(ctx)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	assert.ErrorIs(t, errs[0], backend.ErrBadArgument)
	assert.Contains(t, errs[0].Error(), "mismatched collectives")
	assert.Contains(t, errs[0].Error(), "allreduce #1 (16 bytes float32 max)")
}

func TestShmTimeoutNamesRankAndOp(t *testing.T) {
	start := time.Now()
	errs := shmWorld(t, 3, 300*time.Millisecond, func(ctx context.Context, g backend.ProcessGroup) error {
		x := make([]float64, 1000)
		if err := g.AllReduce(backend.Float64s(x), backend.Sum).Wait(ctx); err != nil {
			return err
		}
		if g.Rank() == 2 {
			time.Sleep(time.Second) // never issues the second op in time
			return nil
		}
		return g.AllReduce(backend.Float64s(x), backend.Sum).Wait(ctx)
	})
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, errs[2])
	for _, r := range []int{0, 1} {
		require.Error(t, errs[r])
		assert.Contains(t, errs[r].Error(), "allreduce #2 (8000 bytes)")
		assert.Contains(t, errs[r].Error(), "float64 sum")
		var oe *backend.OpError
		require.ErrorAs(t, errs[r], &oe)
		assert.Equal(t, []int{2}, oe.Peers, "%v", errs[r])
		// Either it timed out itself, or it learned first that the other did.
		assert.True(t, errors.Is(errs[r], backend.ErrTimeout) || errors.Is(errs[r], backend.ErrPeerFailed), "%v", errs[r])
	}
}

func TestShmMonitoredBarrier(t *testing.T) {
	errs := shmWorld(t, 3, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		mb := g.(backend.BarrierMonitor)
		if g.Rank() == 2 {
			time.Sleep(500 * time.Millisecond)
		}
		err := mb.MonitoredBarrier(ctx, 100*time.Millisecond)
		if g.Rank() != 2 {
			if err == nil || !errors.Is(err, backend.ErrTimeout) || !strings.Contains(err.Error(), "rank 2 did not arrive") {
				return fmt.Errorf("rank %d: want a timeout naming rank 2, got %v", g.Rank(), err)
			}
		} else if err != nil {
			return err
		}
		// The group survives a monitored-barrier timeout.
		x := []int64{int64(g.Rank())}
		if err := g.AllReduce(backend.Int64s(x), backend.Sum).Wait(ctx); err != nil {
			return err
		}
		if x[0] != 3 {
			return fmt.Errorf("got %d", x[0])
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestShmProgressWithoutWait(t *testing.T) {
	// Rank 0 issues an op and does not wait on it until rank 1 has finished
	// its own: the op must progress in the background, small or large, in
	// either execution mode (see shmEager).
	for _, mode := range []string{"eager", "lazy"} {
		for _, n := range []int{3, 128 << 10} {
			t.Run(fmt.Sprintf("%s/n=%d", mode, n), func(t *testing.T) {
				t.Setenv("GODDP_SHM_ASYNC", mode)
				done := make(chan struct{})
				errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(i%7 + g.Rank())
					}
					w := g.AllReduce(backend.Float32s(x), backend.Sum)
					if g.Rank() == 0 {
						select {
						case <-done:
						case <-time.After(5 * time.Second):
							return errors.New("rank 1 never finished: no background progress")
						}
					}
					if err := w.Wait(ctx); err != nil {
						return err
					}
					if g.Rank() == 1 {
						close(done)
					}
					for i, v := range x {
						if want := float32(2*(i%7) + 1); v != want {
							return fmt.Errorf("x[%d] = %v, want %v", i, v, want)
						}
					}
					return nil
				})
				for _, err := range errs {
					require.NoError(t, err)
				}
			})
		}
	}
}

func TestShmEager(t *testing.T) {
	t.Setenv("GODDP_SHM_ASYNC", "")
	t.Setenv("OMP_NUM_THREADS", "")
	t.Setenv("GODDP_NUM_THREADS", "")
	ncpu := runtime.NumCPU()
	assert.True(t, eagerFromEnv(t, 1) == (1 < ncpu), "one rank of one thread")
	assert.False(t, eagerFromEnv(t, ncpu), "a rank per core leaves no core for the worker")
	t.Setenv("OMP_NUM_THREADS", "2")
	assert.Equal(t, 2 < ncpu, eagerFromEnv(t, 1), "OMP_NUM_THREADS counts")
	t.Setenv("GODDP_NUM_THREADS", fmt.Sprint(ncpu))
	assert.False(t, eagerFromEnv(t, 1), "GODDP_NUM_THREADS wins over OMP_NUM_THREADS")
	t.Setenv("GODDP_SHM_ASYNC", "eager")
	assert.True(t, eagerFromEnv(t, ncpu))
	t.Setenv("GODDP_SHM_ASYNC", "lazy")
	assert.False(t, eagerFromEnv(t, 1))
}

// eagerFromEnv is the execution mode a group of world ranks picks from the
// environment.
func eagerFromEnv(t *testing.T, world int) bool {
	t.Helper()
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	return shmEager(c.resolve(world).Async)
}

func TestShmCancellableWait(t *testing.T) {
	errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		x := make([]float32, 1<<18)
		for i := range x {
			x[i] = 1
		}
		for i := 0; i < 3; i++ {
			if err := g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx); err != nil {
				return err
			}
		}
		if x[12345] != 8 {
			return fmt.Errorf("got %v", x[12345])
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestShmCloseFailsPeers(t *testing.T) {
	errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 1 {
			time.Sleep(100 * time.Millisecond)
			g.Close()
			if err := g.Barrier().Wait(ctx); !errors.Is(err, backend.ErrClosed) {
				return fmt.Errorf("after Close: %v", err)
			}
			return nil
		}
		err := g.Barrier().Wait(ctx)
		if !errors.Is(err, backend.ErrPeerFailed) || !strings.Contains(err.Error(), "rank 1 closed the group") {
			return fmt.Errorf("want peer-closed error, got %v", err)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestShmNewGroup(t *testing.T) {
	errs := shmWorld(t, 4, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		sub, err := g.(backend.Subgrouper).NewGroup(ctx, []int{3, 1})
		if err != nil {
			return err
		}
		if g.Rank() == 0 || g.Rank() == 2 {
			if sub != nil {
				return errors.New("non-member got a group")
			}
		} else {
			defer sub.Close()
			x := []int32{int32(g.Rank())}
			if err := sub.AllReduce(backend.Int32s(x), backend.Sum).Wait(ctx); err != nil {
				return err
			}
			if x[0] != 4 || sub.Size() != 2 || sub.Rank() != g.Rank()/2 {
				return fmt.Errorf("sub rank %d size %d got %d", sub.Rank(), sub.Size(), x[0])
			}
		}
		// The parent still works after the subgroup.
		return g.Barrier().Wait(ctx)
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestShmSetupErrors(t *testing.T) {
	_, err := New(context.Background(), backend.Options{Rank: 2, Size: 2, Store: commtest.NewStore()})
	assert.ErrorIs(t, err, backend.ErrBadArgument)
	_, err = New(context.Background(), backend.Options{Rank: 0, Size: 2})
	assert.ErrorIs(t, err, backend.ErrBadArgument)
	// Rank 1 finds a record for a segment that does not exist (another host).
	store := commtest.NewStore()
	ctx := context.Background()
	store.Add(ctx, "shm/instances/0", 1)
	store.Set(ctx, "shm/1/seg", []byte(shmParams{name: "goddp-shm-0-missing", slotBytes: 1 << 16, nbuf: 2,
		smallMax: 1024, chunkBytes: 4096, cmaMin: 1 << 20, ringBytes: 8192}.encode()))
	_, err = New(ctx, backend.Options{Rank: 1, Size: 2, Store: store, Timeout: time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "one host")
	v, _ := store.Get(ctx, "shm/1/open/1")
	assert.Contains(t, string(v), "error")
}

func TestShmWaitContextEnds(t *testing.T) {
	errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, g backend.ProcessGroup) error {
		x := make([]float64, 100)
		if g.Rank() == 1 {
			time.Sleep(time.Second) // arrives late
			// Rank 0 posted its data before it gave up, so this op may
			// still complete here; the next one cannot.
			g.AllReduce(backend.Float64s(x), backend.Sum).Wait(ctx)
			start := time.Now()
			err := g.Barrier().Wait(ctx)
			var oe *backend.OpError
			if !errors.As(err, &oe) || !errors.Is(err, backend.ErrPeerFailed) || len(oe.Peers) != 1 || oe.Peers[0] != 0 ||
				time.Since(start) > 2*time.Second {
				return fmt.Errorf("late rank: want a prompt peer-failed error naming rank 0, got %v", err)
			}
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := g.AllReduce(backend.Float64s(x), backend.Sum).Wait(cctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			return fmt.Errorf("want the context's deadline promptly, got %v after %v", err, time.Since(start))
		}
		// The ranks are out of step now: the group refuses further work.
		if err := g.Barrier().Wait(ctx); err == nil || !strings.Contains(err.Error(), "unusable") {
			return fmt.Errorf("after an abandoned op: %v", err)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// A Wait marked backend.WaitBeside (DDP's bucket watchers, beside
// backward) does not count as a waiter, so the op's waits keep the short
// spin (spinBudget); an unmarked Wait does. Rank 1 holds back until rank
// 0's Wait is under way and reads rank 0's count meanwhile.
func TestShmWaitBesideIsNotAWaiter(t *testing.T) {
	for _, beside := range []bool{true, false} {
		var rank0 atomic.Pointer[shmGroup]
		var seen atomic.Int32
		started := make(chan struct{})
		errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
			g := pg.(*shmGroup)
			x := make([]float32, 1<<16)
			if g.rank == 1 {
				<-started
				// Rank 0 enters its Wait meanwhile: an unmarked one shows
				// within the poll (seconds on a loaded machine), a marked one
				// must not show in 100 ms.
				limit := 5 * time.Second
				if beside {
					limit = 100 * time.Millisecond
				}
				for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(time.Millisecond) {
					if n := rank0.Load().waiters.Load(); n != 0 {
						seen.Store(n)
						break
					}
				}
				return g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx)
			}
			rank0.Store(g)
			w := g.AllReduce(backend.Float32s(x), backend.Sum)
			wctx := ctx
			if beside {
				wctx = backend.WaitBeside(ctx)
			}
			close(started)
			return w.Wait(wctx)
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
		want := int32(1)
		if beside {
			want = 0
		}
		require.Equal(t, want, seen.Load(), "rank 0's waiters during a Wait (beside: %v)", beside)
	}
}
