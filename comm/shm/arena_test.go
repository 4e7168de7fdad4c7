package shm

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
)

// An all-reduce of a buffer in AllocShared memory, at several offsets of
// the region, gives exactly what the slot algorithms give on a copy of it
// in ordinary memory, for every dtype and op, at worlds 2 to 4.
func TestShmSharedAllReduce(t *testing.T) {
	dtypes := []backend.DType{backend.Float32, backend.Float64, backend.BFloat16, backend.Int64}
	ops := []backend.ReduceOp{backend.Sum, backend.Avg, backend.Max, backend.Product}
	for _, world := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			errs := shmWorld(t, world, 30*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
				g := pg.(*shmGroup)
				region, err := g.AllocShared(ctx, 8*(300001+64))
				if err != nil {
					return err
				}
				var want int64
				for _, dt := range dtypes {
					for _, op := range ops {
						for _, n := range []int{5, 3001, 300001} { // the small path, a few and many pieces
							for _, off := range []int{0, 8 * 7} {
								in := commtest.Input(dt, g.Rank()+int(op), n)
								shared := backend.Buffer{DType: dt, Bytes: region[off : off+len(in.Bytes)]}
								copy(shared.Bytes, in.Bytes)
								heap := backend.Buffer{DType: dt, Bytes: bytes.Clone(in.Bytes)}
								if err := g.AllReduce(shared, op).Wait(ctx); err != nil {
									return fmt.Errorf("%v %v n=%d off=%d shared: %w", dt, op, n, off, err)
								}
								if err := g.AllReduce(heap, op).Wait(ctx); err != nil {
									return fmt.Errorf("%v %v n=%d off=%d heap: %w", dt, op, n, off, err)
								}
								if len(in.Bytes) > g.smallMax {
									want++
								}
								if !bytes.Equal(shared.Bytes, heap.Bytes) {
									return fmt.Errorf("%v %v n=%d off=%d: the shared-buffer result differs from the slots'", dt, op, n, off)
								}
							}
						}
					}
				}
				// Up to SmallMax the slots' one-step path runs; above, the shared one.
				if g.sharedOps.Load() != want || want == 0 {
					return fmt.Errorf("%d all-reduces ran in the shared buffer, want %d", g.sharedOps.Load(), want)
				}
				return nil
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			assert.Empty(t, shmSegmentsLeft(t))
		})
	}
}

// One rank reducing in a shared buffer and the other in ordinary memory is
// a programming error: both fail, naming it, instead of hanging.
func TestShmSharedMismatch(t *testing.T) {
	errs := shmWorld(t, 2, 5*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
		g := pg.(*shmGroup)
		region, err := g.AllocShared(ctx, 1<<20)
		if err != nil {
			return err
		}
		buf := region[:64<<10]
		if g.Rank() == 1 {
			buf = make([]byte, 64<<10)
		}
		return g.AllReduce(backend.Buffer{DType: backend.Float32, Bytes: buf}, backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.Contains(t, err.Error(), "mismatched collectives", "rank %d", r)
	}
	assert.Contains(t, errs[0].Error(), "in shared buffer 0 at +0")
}

// A shared buffer that cannot be created fails on every rank, and the next
// allocation still works (the ranks stay in step).
func TestShmAllocSharedFailsEverywhere(t *testing.T) {
	errs := shmWorld(t, 3, 10*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
		g := pg.(*shmGroup)
		if _, err := g.AllocShared(ctx, 1<<50); err == nil {
			return fmt.Errorf("a 1 PiB shared buffer was allocated")
		} else if g.Rank() > 0 && !assert.ErrorIs(t, err, backend.ErrPeerFailed) {
			return fmt.Errorf("rank %d: %w", g.Rank(), err)
		}
		if _, err := g.AllocShared(ctx, 0); err == nil {
			return fmt.Errorf("a zero-byte shared buffer was allocated")
		}
		region, err := g.AllocShared(ctx, 1<<20)
		if err != nil {
			return fmt.Errorf("after a failed allocation: %w", err)
		}
		for i := range region {
			region[i] = byte(g.Rank())
		}
		x := backend.Buffer{DType: backend.Float32, Bytes: region[:256<<10]}
		return g.AllReduce(x, backend.Sum).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	assert.Empty(t, shmSegmentsLeft(t))
}

// FreeShared on every rank lets the next AllocShared that fits reuse the
// region, cleared; a region freed on one rank only, freed twice, or not
// from AllocShared is refused with an error naming it, on every rank.
func TestShmSharedReuse(t *testing.T) {
	errs := shmWorld(t, 2, 10*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
		g := pg.(*shmGroup)
		a, err := g.AllocShared(ctx, 1<<20)
		if err != nil {
			return err
		}
		for i := range a {
			a[i] = 7
		}
		if err := g.FreeShared(a); err != nil {
			return err
		}
		if err := g.FreeShared(a); err == nil || !strings.Contains(err.Error(), "freed twice") {
			return fmt.Errorf("double free: %v", err)
		}
		if err := g.FreeShared(make([]byte, 8)); err == nil {
			return fmt.Errorf("freeing ordinary memory succeeded")
		}
		b, err := g.AllocShared(ctx, 512<<10)
		if err != nil {
			return err
		}
		if &b[0] != &a[0] || len(b) != 512<<10 {
			return fmt.Errorf("a freed region that fits was not reused")
		}
		for i, v := range b {
			if v != 0 {
				return fmt.Errorf("reused region not cleared at %d", i)
			}
		}
		// Reduced through the shared path after reuse.
		for i := range b {
			b[i] = 0
		}
		x := backend.Buffer{DType: backend.Float32, Bytes: b[:256<<10]}
		if err := g.AllReduce(x, backend.Sum).Wait(ctx); err != nil {
			return err
		}
		// Freed on rank 0 only: rank 0 proposes it, rank 1 refuses, all fail.
		if g.Rank() == 0 {
			if err := g.FreeShared(b); err != nil {
				return err
			}
		}
		_, err = g.AllocShared(ctx, 4096)
		if err == nil {
			return fmt.Errorf("reuse of a region rank 1 still holds succeeded")
		}
		if g.Rank() == 1 && !strings.Contains(err.Error(), "has not freed it") {
			return fmt.Errorf("rank 1's error does not say why: %v", err)
		}
		if g.Rank() == 1 {
			if err := g.FreeShared(b); err != nil {
				return err
			}
		}
		c, err := g.AllocShared(ctx, 4096)
		if err != nil {
			return fmt.Errorf("after both ranks freed it: %w", err)
		}
		if &c[0] != &a[0] {
			return fmt.Errorf("the region freed on both ranks was not reused")
		}
		if g.sharedOps.Load() != 1 || len(*g.arenas.Load()) != 1 {
			return fmt.Errorf("%d shared all-reduces, %d arenas; want 1 and 1", g.sharedOps.Load(), len(*g.arenas.Load()))
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
