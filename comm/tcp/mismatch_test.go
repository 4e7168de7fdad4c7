package tcp

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mismatchCase has some ranks issue a collective (issue) that differs from
// the others' as its second op; want is each rank's op as the error must
// name it.
type mismatchCase struct {
	name  string
	world int
	issue func(g backend.ProcessGroup) backend.Work
	want  func(rank int) string
}

// f32 and f64 are buffers of n elements.
func f32(n int) backend.Buffer { return backend.Float32s(make([]float32, n)) }
func f64(n int) backend.Buffer { return backend.Float64s(make([]float64, n)) }

// oneDiffers: rank 1 issues b, the others a.
func oneDiffers(a, b func(g backend.ProcessGroup) backend.Work, wa, wb string) (func(backend.ProcessGroup) backend.Work, func(int) string) {
	return func(g backend.ProcessGroup) backend.Work {
			if g.Rank() == 1 {
				return b(g)
			}
			return a(g)
		}, func(r int) string {
			if r == 1 {
				return wb
			}
			return wa
		}
}

func mismatchCases() []mismatchCase {
	allreduce := func(n int, op backend.ReduceOp) func(backend.ProcessGroup) backend.Work {
		return func(g backend.ProcessGroup) backend.Work { return g.AllReduce(f32(n), op) }
	}
	broadcast := func(n, root int) func(backend.ProcessGroup) backend.Work {
		return func(g backend.ProcessGroup) backend.Work { return g.Broadcast(f32(n), root) }
	}
	var cs []mismatchCase
	add := func(name string, world int, a, b func(backend.ProcessGroup) backend.Work, wa, wb string) {
		issue, want := oneDiffers(a, b, wa, wb)
		cs = append(cs, mismatchCase{fmt.Sprintf("%s/world%d", name, world), world, issue, want})
	}
	for _, world := range []int{2, 3} {
		add("kind", world, allreduce(1024, backend.Sum), broadcast(1024, 0),
			"allreduce(sum, float32, 4096 B)", "broadcast(root 0, float32, 4096 B)")
		add("kind-large", world, allreduce(1<<20, backend.Sum), broadcast(1<<20, 0),
			"allreduce(sum, float32, 4194304 B)", "broadcast(root 0, float32, 4194304 B)")
		add("op", world, allreduce(1024, backend.Sum), allreduce(1024, backend.Max),
			"allreduce(sum, float32, 4096 B)", "allreduce(max, float32, 4096 B)")
		add("op-large", world, allreduce(1<<20, backend.Sum), allreduce(1<<20, backend.Max),
			"allreduce(sum, float32, 4194304 B)", "allreduce(max, float32, 4194304 B)")
		add("size", world, allreduce(1024, backend.Sum), allreduce(2048, backend.Sum),
			"allreduce(sum, float32, 4096 B)", "allreduce(sum, float32, 8192 B)")
		// The same bytes: no size check can see it.
		add("dtype", world, allreduce(1024, backend.Sum),
			func(g backend.ProcessGroup) backend.Work { return g.AllReduce(f64(512), backend.Sum) },
			"allreduce(sum, float32, 4096 B)", "allreduce(sum, float64, 4096 B)")
		add("barrier", world, allreduce(1, backend.Sum), func(g backend.ProcessGroup) backend.Work { return g.Barrier() },
			"allreduce(sum, float32, 4 B)", "barrier")
	}
	// Every rank waits to receive from another root: no data moves at all.
	cs = append(cs, mismatchCase{"root/world2", 2,
		func(g backend.ProcessGroup) backend.Work { return g.Broadcast(f32(1024), 1-g.Rank()) },
		func(r int) string { return fmt.Sprintf("broadcast(root %d, float32, 4096 B)", 1-r) }})
	cs = append(cs, mismatchCase{"gather-root/world3", 3,
		func(g backend.ProcessGroup) backend.Work {
			root := min(g.Rank(), 1) // rank 0 gathers at 0, ranks 1 and 2 at 1
			var out backend.Buffer
			if g.Rank() == root {
				out = f32(3 * 256)
			}
			return g.(backend.Gatherer).Gather(out, f32(256), root)
		},
		func(r int) string { return fmt.Sprintf("gather(root %d, float32, 1024 B)", min(r, 1)) }})
	return cs
}

// TestTCPMismatchFailsFast: when ranks issue different collectives (kind,
// reduce op, size, dtype, root) under one sequence number, every rank fails
// within 5 s, well before the 30 s timeout, with ErrBadArgument and an
// error that names both collectives: in that op, or (a rank that only
// sends, to ranks that agree with it) in the next. Before the descriptors, these hung to
// the timeout, failed with a bare size complaint, or (op, dtype) returned
// different results on each rank.
func TestTCPMismatchFailsFast(t *testing.T) {
	for _, tc := range mismatchCases() {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			took := map[int]time.Duration{}
			errs := tcpWorld(t, tc.world, backend.Options{Timeout: 30 * time.Second, StallThreshold: -1}, func(ctx context.Context, g backend.ProcessGroup) error {
				if err := g.AllReduce(f32(4), backend.Sum).Wait(ctx); err != nil {
					return fmt.Errorf("matching all-reduce: %w", err)
				}
				start := time.Now()
				err := tc.issue(g).Wait(ctx)
				if err == nil {
					// A rank that only sends, to ranks that agree with it,
					// is done; it learns of the mismatch at its next op.
					err = g.Barrier().Wait(ctx)
				}
				mu.Lock()
				took[g.Rank()] = time.Since(start)
				mu.Unlock()
				if err == nil {
					return errors.New("the mismatched collective and a barrier completed")
				}
				return err
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				msg := err.Error()
				assert.Less(t, took[r], 5*time.Second, "rank %d: %v", r, err)
				assert.ErrorIs(t, err, backend.ErrBadArgument, "rank %d", r)
				assert.Contains(t, msg, "collective #2 mismatch", "rank %d", r)
				named := 0
				for q := range tc.world {
					if strings.Contains(msg, fmt.Sprintf("rank %d issued %s", q, tc.want(q))) {
						named++
					}
				}
				assert.Equal(t, 2, named, "rank %d names two ranks' ops: %v", r, err)
			}
		})
	}
}

// TestTCPStallInspectorComparesOps: the stall inspector compares what the
// ranks run, not only how far they got. Rank 1 reaches op #2 late, with a
// different op: ranks that wait on it must not call the network slow
// ("every rank has reached it") but name both ops and fail.
func TestTCPStallInspectorComparesOps(t *testing.T) {
	g := &tcpGroup{rank: 0, size: 2}
	o := &tcpOp{name: "allreduce", seq: 2, desc: opDesc{coll: collAllReduce, dtype: backend.Float32, redop: backend.Sum, count: 1024}}
	same := progressNote{rank: 1, started: 2, inOp: true, op: "allreduce", desc: o.desc}
	other := same
	other.op, other.desc = "broadcast", opDesc{coll: collBroadcast, dtype: backend.Float32, count: 1024}
	behind := progressNote{rank: 1, started: 1, completed: 1}

	for _, n := range []progressNote{same, behind} {
		assert.Nil(t, g.mismatchIn(o, map[int]progressNote{1: n}))
	}
	// Through the wire format, as a peer's answer arrives.
	got, err := decodeProgress(1, other.encode())
	require.NoError(t, err)
	f := g.mismatchIn(o, map[int]progressNote{1: got})
	require.NotNil(t, f)
	assert.ErrorIs(t, f, backend.ErrBadArgument)
	assert.Equal(t, "collective #2 mismatch: rank 0 issued allreduce(sum, float32, 4096 B), rank 1 issued broadcast(root 0, float32, 4096 B)", f.detail)
}

// TestTCPStallReportNamesMismatch: two ranks each wait to receive a
// broadcast from the other, so no data moves. The stall report (150 ms
// threshold, before the agreement probe) must say the ranks run different
// collectives and fail them, not that every rank has reached the op and it
// "waits on data"; before, it said so until the timeout.
func TestTCPStallReportNamesMismatch(t *testing.T) {
	var log logSink
	start := time.Now()
	errs := tcpWorld(t, 2, backend.Options{StallThreshold: 150 * time.Millisecond, Timeout: 10 * time.Second, Logf: log.logf},
		func(ctx context.Context, g backend.ProcessGroup) error {
			return g.Broadcast(f32(1024), 1-g.Rank()).Wait(ctx)
		})
	assert.Less(t, time.Since(start), 5*time.Second)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.Contains(t, err.Error(), "collective #1 mismatch: rank 0 issued broadcast(root 1, float32, 4096 B), rank 1 issued broadcast(root 0, float32, 4096 B)", "rank %d", r)
	}
	text := log.text()
	assert.Regexp(t, `comm: stall: broadcast #1 \(4096 bytes\) has waited .* collective #1 mismatch`, text)
	assert.NotContains(t, text, "waits on data")
}
