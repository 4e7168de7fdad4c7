package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/internal/auth"
	"github.com/goddp/goddp/comm/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpWorld runs fn on world tcp ranks (goroutines of this process, real
// loopback connections, one store server) and returns each rank's error.
func tcpWorld(t *testing.T, world int, opts backend.Options, fn func(ctx context.Context, g backend.ProcessGroup) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := store.Listen(ctx, "127.0.0.1:0", store.WithToken(opts.Token))
	require.NoError(t, err)
	defer srv.Close()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Rank, o.Size, o.Store, o.Prefix = r, world, store.NewPrefix("t", srv.Client()), "t"
			if o.Timeout == 0 {
				o.Timeout = 30 * time.Second
			}
			g, err := New(ctx, o)
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

func TestTCPCollectives(t *testing.T) {
	for _, tc := range []struct {
		world int
		ring  bool // two ranks: the ring instead of the exchange
	}{{1, false}, {2, false}, {2, true}, {3, false}, {4, false}} {
		world := tc.world
		t.Run(fmt.Sprintf("world%d/ring=%v", world, tc.ring), func(t *testing.T) {
			t.Setenv("GODDP_TCP_PIECE_BYTES", "4096") // many pieces even for modest sizes
			if tc.ring {
				t.Setenv("GODDP_TCP_EXCHANGE_BYTES", "65536")
			}
			cases := commtest.Cases(world, []int{0, 1, 7, 1000, 4099}, 100_003)
			hashes := make([][]uint64, world)
			errs := tcpWorld(t, world, backend.Options{Token: "test-token-0123456789"}, func(ctx context.Context, g backend.ProcessGroup) error {
				hs, err := commtest.RunCases(ctx, g, cases)
				hashes[g.Rank()] = hs
				return err
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for i, c := range cases {
				if c.Op == "allreduce" || c.Op == "allgather" || c.Op == "broadcast" {
					for r := 1; r < world; r++ {
						require.Equal(t, hashes[0][i], hashes[r][i], "%v: rank %d differs from rank 0", c, r)
					}
				}
			}
		})
	}
}

func TestTCPBadArguments(t *testing.T) {
	errs := tcpWorld(t, 2, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		for _, w := range []backend.Work{
			backend.AllGather(g, backend.Float32s(make([]float32, 3)), backend.Float32s(make([]float32, 2))),
			backend.ReduceScatter(g, backend.Float32s(make([]float32, 2)), backend.Float64s(make([]float64, 4)), backend.Sum),
			g.Broadcast(backend.Float32s(make([]float32, 2)), 2),
			g.AllReduce(backend.Float32s(make([]float32, 2)), backend.ReduceOp(9)),
			g.AllReduce(backend.Buffer{DType: backend.Float32, Bytes: make([]byte, 6)}, backend.Sum),
			backend.AllToAll(g, backend.Float32s(make([]float32, 3)), backend.Float32s(make([]float32, 3))),
			backend.Send(g, backend.Float32s(nil), g.Rank(), 0),
		} {
			if err := w.Wait(ctx); !errors.Is(err, backend.ErrBadArgument) {
				return fmt.Errorf("want a bad-argument error, got %v", err)
			}
		}
		// The group is still usable.
		return g.AllReduce(backend.Float32s([]float32{1}), backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func TestTCPTimeoutNamesMissingRank(t *testing.T) {
	var mu sync.Mutex
	got := map[int]error{}
	start := time.Now()
	tcpWorld(t, 3, backend.Options{Timeout: 700 * time.Millisecond, StallThreshold: -1}, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 2 {
			time.Sleep(2 * time.Second) // never joins; then finds the group failed
		}
		err := g.AllReduce(backend.Float32s(make([]float32, 10)), backend.Sum).Wait(ctx)
		err2 := g.Barrier().Wait(ctx)
		mu.Lock()
		got[g.Rank()] = errors.Join(err, err2)
		mu.Unlock()
		return nil
	})
	assert.Less(t, time.Since(start), 10*time.Second)
	for r := 0; r < 2; r++ {
		err := got[r]
		require.Error(t, err, "rank %d", r)
		var oe *backend.OpError
		require.ErrorAs(t, err, &oe)
		assert.True(t, errors.Is(err, backend.ErrTimeout) || errors.Is(err, backend.ErrPeerFailed), "rank %d: %v", r, err)
		assert.Contains(t, err.Error(), "rank 2", "rank %d", r)
		assert.Contains(t, err.Error(), "allreduce #1")
	}
	// The straggler's later ops fail too instead of hanging.
	assert.Error(t, got[2])
}

func TestTCPStallInspector(t *testing.T) {
	var log logSink
	errs := tcpWorld(t, 3, backend.Options{StallThreshold: 150 * time.Millisecond, Logf: log.logf}, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 1 {
			time.Sleep(900 * time.Millisecond)
		}
		return g.AllReduce(backend.Float32s(make([]float32, 10)), backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	text := log.text()
	assert.Contains(t, text, "comm: stall: allreduce #1 (40 bytes)")
	assert.Contains(t, text, "not arrived: rank 1 (last started #0")
	assert.NotContains(t, text, "rank 2 (")
}

func TestTCPDebugMismatch(t *testing.T) {
	for _, debug := range []bool{true, false} {
		t.Run(fmt.Sprintf("debug=%v", debug), func(t *testing.T) {
			errs := tcpWorld(t, 2, backend.Options{DebugCollectives: debug, Timeout: 5 * time.Second}, func(ctx context.Context, g backend.ProcessGroup) error {
				n := 100 + 4*g.Rank()
				err := g.AllReduce(backend.Float32s(make([]float32, n)), backend.Sum).Wait(ctx)
				if err == nil {
					return fmt.Errorf("mismatched sizes went unnoticed")
				}
				return err
			})
			for r, err := range errs {
				require.Error(t, err)
				// Debug mode's exchange and the frames' descriptors say the same.
				assert.ErrorIs(t, err, backend.ErrBadArgument)
				assert.Contains(t, err.Error(), "collective #1 mismatch")
				assert.Contains(t, err.Error(), "rank 0 issued allreduce(sum, float32, 400 B)", "rank %d", r)
				assert.Contains(t, err.Error(), "rank 1 issued allreduce(sum, float32, 416 B)", "rank %d", r)
			}
		})
	}
}

func TestTCPCloseFailsPending(t *testing.T) {
	errs := tcpWorld(t, 2, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 1 {
			// Rank 1 never joins; rank 0 closes with an op pending.
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		w := g.AllReduce(backend.Float32s(make([]float32, 4)), backend.Sum)
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, g.Close())
		if err := w.Wait(ctx); !errors.Is(err, backend.ErrClosed) {
			return fmt.Errorf("pending op: want ErrClosed, got %v", err)
		}
		if err := g.Barrier().Wait(ctx); !errors.Is(err, backend.ErrClosed) {
			return fmt.Errorf("later op: want ErrClosed, got %v", err)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func TestTCPMonitoredBarrier(t *testing.T) {
	errs := tcpWorld(t, 3, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		m := g.(backend.BarrierMonitor)
		if err := m.MonitoredBarrier(ctx, 5*time.Second); err != nil {
			return fmt.Errorf("full barrier: %w", err)
		}
		if g.Rank() == 2 {
			time.Sleep(time.Second)
			return nil
		}
		err := m.MonitoredBarrier(ctx, 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "rank 2 did not reach the barrier") {
			return fmt.Errorf("want the missing rank named, got %v", err)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func TestTCPNewGroup(t *testing.T) {
	errs := tcpWorld(t, 4, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		sub, err := g.(backend.Subgrouper).NewGroup(ctx, []int{3, 1})
		if err != nil {
			return err
		}
		if g.Rank() == 0 || g.Rank() == 2 {
			if sub != nil {
				return fmt.Errorf("rank %d outside the subgroup got a group", g.Rank())
			}
		} else {
			defer sub.Close()
			if want := g.Rank() / 2; sub.Rank() != want || sub.Size() != 2 {
				return fmt.Errorf("subgroup rank %d of %d, want %d of 2", sub.Rank(), sub.Size(), want)
			}
			x := []int64{int64(g.Rank())}
			if err := sub.AllReduce(backend.Int64s(x), backend.Sum).Wait(ctx); err != nil {
				return err
			}
			if x[0] != 4 {
				return fmt.Errorf("subgroup sum %d, want 4", x[0])
			}
		}
		// The parent still works alongside.
		return g.Barrier().Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// meshRank0 starts rank 0 of a 2-rank tcp group in the background and
// returns the address it listens on, a function that joins rank 1 and
// returns both groups once the mesh is up, and the groups' log.
func meshRank0(t *testing.T, ctx context.Context) (addr string, join func() (g0, g1 backend.ProcessGroup), log *logSink) {
	t.Helper()
	srv, err := store.Listen(ctx, "127.0.0.1:0", store.WithToken("test-token-0123456789"))
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	log = &logSink{}
	mk := func(r int) (backend.ProcessGroup, error) {
		return New(ctx, backend.Options{Rank: r, Size: 2, Store: srv.Client(), Token: "test-token-0123456789", Prefix: "p", Logf: log.logf})
	}
	res := make(chan error, 1)
	var first backend.ProcessGroup
	go func() {
		var err error
		first, err = mk(0)
		res <- err
	}()
	v, err := srv.Client().Get(ctx, "tcp/addr/0")
	require.NoError(t, err)
	return string(v), func() (backend.ProcessGroup, backend.ProcessGroup) {
		g1, err := mk(1)
		require.NoError(t, err)
		t.Cleanup(func() { g1.Close() })
		require.NoError(t, <-res)
		t.Cleanup(func() { first.Close() })
		return first, g1
	}, log
}

func TestTCPStrangerRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, join, log := meshRank0(t, ctx)
	// A stranger with the wrong token, and one sending garbage.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	assert.ErrorIs(t, auth.Client(c, "wrong", auth.PurposePeer, []byte("goddp-peer|p|2|1|0"), time.Now().Add(5*time.Second)), backend.ErrAuth)
	c.Close()
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	c.Write([]byte("\x00\x01garbage garbage garbage garbage garbage garbage garbage"))
	c.Close()
	g0, g1 := join()
	w := g0.AllReduce(backend.Float32s([]float32{1}), backend.Sum)
	require.NoError(t, g1.AllReduce(backend.Float32s([]float32{2}), backend.Sum).Wait(ctx))
	require.NoError(t, w.Wait(ctx))
	text := log.text()
	assert.Contains(t, text, "refused connection from 127.0.0.1")
	assert.Contains(t, text, "wrong job token")
	assert.Contains(t, text, "bad handshake magic")
	assert.NotContains(t, text, "tok\"")
}

// TestTCPMeshCutsOffSilentStranger: a connection that never says a word
// must not hold the mesh for the handshake's timeout once every rank is in.
func TestTCPMeshCutsOffSilentStranger(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	addr, join, log := meshRank0(t, ctx)
	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	join()
	assert.Less(t, time.Since(start), auth.Timeout/2, "rank 0 waited for the silent connection's handshake")
	// The stranger's connection was closed by rank 0.
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	assert.Error(t, err)
	assert.Contains(t, log.text(), "refused connection from 127.0.0.1")
}

func TestTCPWaitCancelledInline(t *testing.T) {
	errs := tcpWorld(t, 2, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		// A cancel-only context runs the op inline; cancelling it while the
		// peer never joins fails the op and the group instead of hanging.
		if err := g.AllReduce(backend.Float32s([]float32{1}), backend.Sum).Wait(ctx); err != nil {
			return err
		}
		if g.Rank() == 1 {
			time.Sleep(time.Second)
			return nil
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		err := g.AllReduce(backend.Float32s([]float32{1}), backend.Sum).Wait(cctx)
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("want a cancelled error, got %v", err)
		}
		if time.Since(start) > 5*time.Second {
			return fmt.Errorf("cancel took %v", time.Since(start))
		}
		// A deadline context does not run inline: Wait returns at the
		// deadline and the op goes on (here it fails, the group being down).
		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer dcancel()
		if err := g.Barrier().Wait(dctx); err == nil {
			return fmt.Errorf("barrier on a failed group succeeded")
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestTCPExchangeSlots runs a two-rank all-reduce large enough that the
// exchange's progress loop cycles its few scratch slots many times (and
// ends on a short piece), against a locally computed sum, with both ranks
// checking every element.
func TestTCPExchangeSlots(t *testing.T) {
	const n = (9<<20)/4 + 3 // 9 MiB and 3 floats: 10 pieces, 4 slots
	input := func(r int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((i*7+r*13)%1001) / 64
		}
		return x
	}
	want := make([]float32, n)
	a, b := input(0), input(1)
	for i := range want {
		want[i] = a[i] + b[i]
	}
	errs := tcpWorld(t, 2, backend.Options{}, func(ctx context.Context, g backend.ProcessGroup) error {
		x := input(g.Rank())
		if err := g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx); err != nil {
			return err
		}
		for i := range x {
			if x[i] != want[i] {
				return fmt.Errorf("rank %d: element %d = %v, want %v", g.Rank(), i, x[i], want[i])
			}
		}
		return nil
	})
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
}

// TestTCPExpiredWriteLeavesDiagnosisToTheOp: a write that an op's expiry
// interrupted (the op's deadline set on a connection whose peer does not
// read) must not abort the group naming that peer, which on 3 or more
// ranks is usually waiting for the same laggard: the op's own timeout
// diagnosis (expiredFault, asking every rank) names the cause. A write
// deadline without an expired op is still the peer's fault.
func TestTCPExpiredWriteLeavesDiagnosisToTheOp(t *testing.T) {
	errs := tcpWorld(t, 2, backend.Options{Timeout: 5 * time.Second, StallThreshold: -1}, func(ctx context.Context, pg backend.ProcessGroup) error {
		if pg.Rank() != 0 {
			return nil
		}
		g := pg.(*tcpGroup)
		pc := g.peers[1]
		pc.cut.Store(true) // as expire leaves it
		err := g.connFailed(pc, os.ErrDeadlineExceeded, "write")
		if !errors.Is(err, errExpiredWrite) || !errors.Is(err, backend.ErrTimeout) || g.cause.Load() != nil {
			return fmt.Errorf("write cut by an expiry: got %v, group cause %v; want errExpiredWrite and no abort", err, g.cause.Load())
		}
		pc.cut.Store(false)
		err = g.connFailed(pc, os.ErrDeadlineExceeded, "write")
		if !errors.Is(err, backend.ErrTimeout) || !strings.Contains(err.Error(), "rank 1: a write stayed blocked") || g.cause.Load() == nil {
			return fmt.Errorf("write deadline without an expiry: got %v; want the group aborted naming rank 1", err)
		}
		return nil
	})
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
}

// TestTCPTimeoutAbortReachesIdlePeer: a rank whose op times out while it
// reads inline from a live peer (one that is busy, not in a collective)
// cuts that connection's I/O at its deadline. The abort that follows must
// still reach that peer, so that the peer's next op names the timeout and
// the missing rank rather than a bare "connection closed (EOF)": on 4 tcp
// ranks, that EOF became the cause on a rank still waiting in an earlier
// collective (e2e TestBlackholedRank).
func TestTCPTimeoutAbortReachesIdlePeer(t *testing.T) {
	errs := tcpWorld(t, 2, backend.Options{Timeout: 500 * time.Millisecond, StallThreshold: -1}, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 1 {
			time.Sleep(3 * time.Second) // alive, busy; the peer's timeout and abort pass meanwhile
		}
		return g.AllReduce(backend.Float32s(make([]float32, 10)), backend.Sum).Wait(ctx)
	})
	require.Error(t, errs[0])
	assert.ErrorIs(t, errs[0], backend.ErrTimeout, "rank 0")
	require.Error(t, errs[1])
	assert.ErrorIs(t, errs[1], backend.ErrTimeout, "rank 1 hears rank 0's timeout: %v", errs[1])
	assert.Contains(t, errs[1].Error(), "rank 0 aborted the group", "rank 1")
	assert.NotContains(t, errs[1].Error(), "EOF", "rank 1")
}
