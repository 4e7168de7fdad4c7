package hier_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/hier"
	_ "github.com/goddp/goddp/comm/shm"
	"github.com/goddp/goddp/comm/tcp"
)

// topology places world ranks on hosts: host(r) names rank r's node.
type topology struct {
	name  string
	world int
	host  func(r int) string
}

var topologies = []topology{
	{"2x2 contiguous", 4, func(r int) string { return fmt.Sprint(r / 2) }},
	{"3 nodes x2 interleaved", 6, func(r int) string { return fmt.Sprint(r % 3) }},
	{"2 nodes x3", 6, func(r int) string { return fmt.Sprint(r / 3) }},
	{"1 node x3", 3, func(int) string { return "a" }},
	{"3 nodes x1", 3, func(r int) string { return fmt.Sprint(r) }},
}

// world runs fn on the ranks of a hier group in this process (shm within
// a "host", tcp on loopback across them), small thresholds so that the
// table's modest sizes take the pipelined paths.
func world(t *testing.T, top topology, cfg hier.Config, fn func(ctx context.Context, g backend.ProcessGroup) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := commtest.NewStore()
	errs := make([]error, top.world)
	var wg sync.WaitGroup
	for r := range top.world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			c.Host = top.host(r)
			g, err := hier.NewWithConfig(ctx, backend.Options{Rank: r, Size: top.world, Store: st, Prefix: "t",
				Timeout: 30 * time.Second, StallThreshold: -1}, c)
			if err != nil {
				errs[r] = fmt.Errorf("rank %d setup: %w", r, err)
				return
			}
			defer g.Close()
			errs[r] = fn(ctx, g)
		}()
	}
	wg.Wait()
	return errs
}

func TestConformance(t *testing.T) {
	t.Setenv("GODDP_TCP_PIECE_BYTES", "4096")
	for _, top := range topologies {
		t.Run(top.name, func(t *testing.T) {
			cases := commtest.Cases(top.world, []int{0, 1, 7, 1001}, 20_001)
			hashes := make([][]uint64, top.world)
			errs := world(t, top, hier.Config{SmallBytes: 1024, SegmentBytes: 8192}, func(ctx context.Context, g backend.ProcessGroup) error {
				hs, err := commtest.RunCases(ctx, g, cases)
				hashes[g.Rank()] = hs
				return err
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for i, c := range cases {
				if c.Op == "allreduce" || c.Op == "allreducev" || c.Op == "allgather" || c.Op == "broadcast" {
					for r := 1; r < top.world; r++ {
						require.Equal(t, hashes[0][i], hashes[r][i], "%v: rank %d differs from rank 0", c, r)
					}
				}
			}
		})
	}
}

// Random floats: every rank gets the same bits, and they are the flat
// tcp ring's result up to rounding (the order of the sum differs).
func TestEqualsFlat(t *testing.T) {
	const world, n = 4, 300_007
	top := topologies[0]
	input := func(r int) []float32 {
		rng := rand.New(rand.NewPCG(uint64(r), 7))
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return x
	}
	got := make([][]float32, world)
	errs := world4(t, top, func(ctx context.Context, g backend.ProcessGroup) error {
		got[g.Rank()] = input(g.Rank())
		return g.AllReduce(backend.Float32s(got[g.Rank()]), backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	flat := make([][]float32, world)
	errs = flatWorld(t, world, func(ctx context.Context, g backend.ProcessGroup) error {
		flat[g.Rank()] = input(g.Rank())
		return g.AllReduce(backend.Float32s(flat[g.Rank()]), backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r := 1; r < world; r++ {
		require.Equal(t, math.Float32bits(got[0][12345]), math.Float32bits(got[r][12345]))
		require.Equal(t, got[0], got[r], "rank %d differs from rank 0", r)
	}
	for i := range got[0] {
		if d := math.Abs(float64(got[0][i] - flat[0][i])); d > 1e-5 {
			t.Fatalf("element %d: hier %v, flat tcp %v", i, got[0][i], flat[0][i])
		}
	}
}

func world4(t *testing.T, top topology, fn func(ctx context.Context, g backend.ProcessGroup) error) []error {
	return world(t, top, hier.Config{SegmentBytes: 64 << 10}, fn)
}

func flatWorld(t *testing.T, n int, fn func(ctx context.Context, g backend.ProcessGroup) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := commtest.NewStore()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := tcp.New(ctx, backend.Options{Rank: r, Size: n, Store: st, Prefix: "f", Timeout: 30 * time.Second})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			errs[r] = fn(ctx, g)
		}()
	}
	wg.Wait()
	return errs
}

// Hosts with different rank counts cannot be split in two levels: every
// rank says so at creation.
func TestUnevenHostsRefused(t *testing.T) {
	top := topology{"2+1", 3, func(r int) string { return fmt.Sprint(r / 2) }}
	errs := world(t, top, hier.Config{}, func(context.Context, backend.ProcessGroup) error { return nil })
	for r, err := range errs {
		require.ErrorIs(t, err, backend.ErrBadArgument, "rank %d", r)
		require.ErrorContains(t, err, "same number of ranks")
	}
}

// A closed group fails queued and later ops with ErrClosed.
func TestClosed(t *testing.T) {
	errs := world(t, topologies[0], hier.Config{}, func(ctx context.Context, g backend.ProcessGroup) error {
		if err := g.Barrier().Wait(ctx); err != nil {
			return err
		}
		if err := g.Close(); err != nil {
			return err
		}
		if err := g.AllReduce(backend.Float32s([]float32{1}), backend.Sum).Wait(ctx); !errors.Is(err, backend.ErrClosed) {
			return fmt.Errorf("after Close: %v", err)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// A rank that never issues the collective makes it fail on the others by
// the group's timeout, naming the step, instead of hanging.
func TestTimeoutNamesStep(t *testing.T) {
	st := commtest.NewStore()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top := topologies[0]
	errs := make([]error, top.world)
	var wg sync.WaitGroup
	for r := range top.world {
		wg.Go(func() {
			g, err := hier.NewWithConfig(ctx, backend.Options{Rank: r, Size: top.world, Store: st, Prefix: "t",
				Timeout: 3 * time.Second, StallThreshold: -1}, hier.Config{Host: top.host(r), SegmentBytes: 64 << 10})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			if r == 3 {
				time.Sleep(5 * time.Second) // never joins
				return
			}
			start := time.Now()
			err = g.AllReduce(backend.Float32s(make([]float32, 1<<18)), backend.Sum).Wait(ctx)
			switch {
			case !errors.Is(err, backend.ErrTimeout) && !errors.Is(err, backend.ErrPeerFailed):
				errs[r] = fmt.Errorf("want a timeout, got %v", err)
			case time.Since(start) > 20*time.Second:
				errs[r] = fmt.Errorf("failed only after %v", time.Since(start))
			case !strings.Contains(err.Error(), "allreduce #1") || !strings.Contains(err.Error(), "-node"):
				errs[r] = fmt.Errorf("the error names neither the op nor the step: %v", err)
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
