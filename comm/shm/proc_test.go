package shm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/store"
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
	for _, r := range res {
		if r.seg != "" {
			_, err := os.Stat(r.seg)
			assert.True(t, errors.Is(err, os.ErrNotExist), "segment %s left behind", r.seg)
		}
	}
	return res
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
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
