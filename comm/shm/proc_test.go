package shm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/store"
	"github.com/goddp/goddp/internal/procstat"
	"github.com/goddp/goddp/internal/proctest"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Multi-process shm tests: the test binary re-executes itself as the
// workers through internal/proctest, running only TestShmWorkerProcess,
// which does nothing unless proctest names a mode. The test hosts the
// store. Workers print "SEG <path>" once set up and "RESULT <text>" at the
// end; a failing worker exits non-zero.

type shmProcResult struct {
	rank   int
	out    string
	err    error // exit status
	seg    string
	result string
}

// shmSpawn runs world workers in mode and returns their results.
func shmSpawn(t *testing.T, world int, mode string, timeout time.Duration, env ...string) []shmProcResult {
	t.Helper()
	rs := proctest.Run(t, proctest.Options{Worker: mode, World: world, Timeout: timeout, Env: env, KeepGoing: true,
		Args: []string{"-test.run=^TestShmWorkerProcess$", "-test.count=1"}})
	res := make([]shmProcResult, world)
	for r, pr := range rs {
		res[r] = shmProcResult{rank: r, err: pr.Err, out: pr.Output()}
		sc := bufio.NewScanner(strings.NewReader(pr.Stdout))
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "SEG "); ok {
				res[r].seg = p
			}
			if p, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
				res[r].result = p
			}
		}
	}
	// Whatever assertion fails, later in the test or here, the failure
	// shows every rank's output: a rank that failed first is often not
	// the one whose error the test checks (a flake in world4 once showed
	// only rank 0's "rank 1 closed the group", not why rank 1 had).
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range res {
				t.Logf("rank %d (%s) output:\n%s", r.rank, exitDesc(r.err), r.out)
			}
		}
	})
	for _, r := range res {
		if r.seg != "" {
			_, err := os.Stat(r.seg)
			assert.True(t, errors.Is(err, os.ErrNotExist), "segment %s left behind", r.seg)
		}
	}
	return res
}

// exitDesc says how a worker ended.
func exitDesc(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func TestShmMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	for _, world := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			// World 3 runs its larger cases over the single-copy path.
			var env []string
			if world == 3 {
				env = []string{"GODDP_SHM_CMA_MIN=64K"}
			}
			for _, r := range shmSpawn(t, world, "cases", 90*time.Second, env...) {
				require.NoError(t, r.err, "rank %d output:\n%s", r.rank, r.out)
				assert.Equal(t, "ok", r.result, "rank %d", r.rank)
				assert.NotEmpty(t, r.seg)
			}
		})
	}
}

func TestShmKilledPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	// The victim SIGKILLs itself in the middle of a stream of collectives;
	// rank 0 is a victim too in one case (it created the segment).
	// Single-copy, chunked and small all-reduces.
	for _, tc := range []struct {
		victim int
		elems  int
		cma    bool
	}{{1, 1 << 20, true}, {0, 1 << 20, true}, {1, 1 << 20, false}, {2, 1 << 10, false}} {
		victim := tc.victim
		t.Run(fmt.Sprintf("victim%d/%dB/cma=%v", victim, 4*tc.elems, tc.cma), func(t *testing.T) {
			start := time.Now()
			env := "GODDP_SHM_CMA_MIN=0"
			if tc.cma {
				env = "GODDP_SHM_CMA_MIN=1M"
			}
			res := shmSpawn(t, 3, fmt.Sprintf("kill%d/%d", victim, tc.elems), 60*time.Second, env)
			assert.Less(t, time.Since(start), 30*time.Second)
			for _, r := range res {
				if r.rank == victim {
					var ee *exec.ExitError
					require.ErrorAs(t, r.err, &ee, "victim output:\n%s", r.out)
					continue
				}
				require.NoError(t, r.err, "rank %d output:\n%s", r.rank, r.out)
				t.Logf("rank %d: %s", r.rank, r.result)
				assert.Contains(t, r.result, fmt.Sprintf("peers=[%d]", victim), "rank %d", r.rank)
				assert.Contains(t, r.result, "peer failed", "rank %d", r.rank)
			}
		})
	}
}

// TestShmPeerLeftAfterItsPart: a rank that has done its part and closed
// its group cleanly (its process gone) while two others still finish
// theirs must not fail them. Before issue 43 a waiting rank's liveness
// check of the ranks it was not waiting for took such a rank for a dead
// one: TestShmMultiProcess/world4 flaked under load with "send #121
// (400012 bytes) on rank 0: ...: rank 1 closed the group" when rank 3 had
// finished the final ring exchange and exited while rank 1 still waited
// for rank 0's message, so rank 1 failed ("rank 3 closed the group") and
// closed. Here rank 2 leaves first: in "p2p" rank 1 waits for a message
// from rank 0, in "gather" root 0 waits for rank 1's part; the rank that
// is waited for starts only once rank 2's process has gone.
func TestShmPeerLeftAfterItsPart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	for _, what := range []string{"p2p", "gather"} {
		t.Run(what, func(t *testing.T) {
			for _, r := range shmSpawn(t, 3, "leave/"+what, 60*time.Second) {
				require.NoError(t, r.err, "rank %d", r.rank)
				assert.Equal(t, "ok", r.result, "rank %d", r.rank)
			}
		})
	}
}

// shmAwaitGone returns once rank k's process has exited, and then a few
// liveness periods more, so that a rank waiting meanwhile has checked
// rank k since (were it descheduled all that time, the test would check
// less, never fail wrongly).
func shmAwaitGone(t *testing.T, g *shmGroup, k int) {
	require.Eventually(t, func() bool { return !procstat.Alive(g.pids[k], g.starts[k]) }, 20*time.Second, 5*time.Millisecond,
		"rank %d (pid %d) still runs", k, g.pids[k])
	time.Sleep(4 * shmLivenessEvery)
}

// TestShmWorkerProcess is the body of a worker process; a no-op otherwise.
func TestShmWorkerProcess(t *testing.T) {
	mode := os.Getenv(proctest.WorkerEnv)
	if mode == "" {
		t.Skip("only runs as a worker of the multi-process tests")
	}
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	ctx := context.Background()
	st, err := store.Dial(ctx, net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")), store.WithToken(os.Getenv("GODDP_TOKEN")))
	require.NoError(t, err)
	defer st.Close()
	timeout := 60 * time.Second
	if strings.HasPrefix(mode, "kill") {
		timeout = 20 * time.Second
	}
	pg, err := New(ctx, backend.Options{Rank: rank, Size: world, Store: st, Timeout: timeout})
	require.NoError(t, err)
	defer pg.Close()
	fmt.Printf("SEG %s\n", pg.(*shmGroup).seg.path)

	switch {
	case mode == "cases":
		if os.Getenv("GODDP_SHM_CMA_MIN") == "64K" {
			require.True(t, pg.(*shmGroup).cma, "single-copy path not enabled between processes")
		}
		cases := commtest.CasesFor(world, nil, []int{0, 1, 7, 1001})
		cases = append(cases, commtest.CasesFor(world, []backend.DType{backend.Float32, backend.Float16, backend.Int32}, []int{16385, 70001})...)
		hashes := make([]uint64, 0, len(cases))
		for _, c := range cases {
			h, err := commtest.RunCase(ctx, pg, c)
			require.NoError(t, err)
			if c.Op == "allreduce" {
				hashes = append(hashes, h)
			}
		}
		// Bit-identical results on every rank: gather the hashes at rank 0.
		in := make([]int64, len(hashes))
		for i, h := range hashes {
			in[i] = int64(h)
		}
		all := make([]int64, world*len(in))
		require.NoError(t, backend.AllGather(pg, backend.Int64s(all), backend.Int64s(in)).Wait(ctx))
		for k := 1; k < world; k++ {
			require.Equal(t, all[:len(in)], all[k*len(in):(k+1)*len(in)], "rank %d's all-reduce results differ from rank 0's", k)
		}
		// Point-to-point across processes: a ring exchange larger than the ring buffer.
		pout := commtest.Input(backend.Float32, rank, 100003)
		pin := commtest.MakeBuffer(backend.Float32, make([]float64, 100003))
		ws := backend.Send(pg, pout, (rank+1)%world, 3)
		require.NoError(t, backend.Recv(pg, pin, (rank+world-1)%world, 3).Wait(ctx))
		require.NoError(t, ws.Wait(ctx))
		require.Equal(t, commtest.Input(backend.Float32, (rank+world-1)%world, 100003).Bytes, pin.Bytes)
		fmt.Println("RESULT ok")
	case strings.HasPrefix(mode, "kill"):
		var victim, elems int
		fmt.Sscanf(mode, "kill%d/%d", &victim, &elems)
		if rank == victim {
			time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
		}
		x := make([]float32, elems)
		for i := 0; ; i++ {
			if err := pg.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx); err != nil {
				var oe *backend.OpError
				require.ErrorAs(t, err, &oe)
				fmt.Printf("RESULT peers=%v %v\n", oe.Peers, err)
				return
			}
			require.Less(t, i, 1<<20, "no error after the victim died")
		}
	case strings.HasPrefix(mode, "leave/"):
		// Rank 2 does its part (nothing, or its share of the gather) and
		// leaves; see TestShmPeerLeftAfterItsPart.
		const n, leaver = 1001, 2
		sg := pg.(*shmGroup)
		switch mode {
		case "leave/p2p":
			switch rank {
			case 0:
				shmAwaitGone(t, sg, leaver)
				require.NoError(t, backend.Send(pg, commtest.Input(backend.Float32, 0, n), 1, 5).Wait(ctx))
			case 1:
				in := commtest.MakeBuffer(backend.Float32, make([]float64, n))
				require.NoError(t, backend.Recv(pg, in, 0, 5).Wait(ctx))
				require.Equal(t, commtest.Input(backend.Float32, 0, n).Bytes, in.Bytes)
			}
		case "leave/gather":
			if rank == 1 {
				shmAwaitGone(t, sg, leaver)
			}
			out := commtest.MakeBuffer(backend.Float32, make([]float64, world*n))
			require.NoError(t, backend.Gather(pg, out, commtest.Input(backend.Float32, rank, n), 0).Wait(ctx))
			if rank == 0 {
				for k := range world {
					part := out.Bytes[k*4*n : (k+1)*4*n]
					require.Equal(t, commtest.Input(backend.Float32, k, n).Bytes, part, "rank %d's part", k)
				}
			}
		default:
			t.Fatalf("unknown mode %q", mode)
		}
		fmt.Println("RESULT ok")
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
