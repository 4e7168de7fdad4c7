package hier_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/hier"
	"github.com/goddp/goddp/comm/store"
	"github.com/goddp/goddp/internal/proctest"
)

func TestMain(m *testing.M) { proctest.MainFunc(m, procWorker) }

// The 2 hosts of 2 ranks of the multi-process test (ranks 0, 1 on host
// "0", ranks 2, 3 on host "1"), and the rank that is killed.
const procVictim = 3

func procHost(r int) string { return strconv.Itoa(r / 2) }

// A rank SIGKILLed in the middle of hierarchical all-reduces, as a crashed
// process is: each survivor's error names it by global rank and node, and
// lists it first among the ranks at fault. Rank 2 shares its host (shm),
// rank 1 its local index (tcp across hosts), and rank 0 meets neither it
// nor its group: it learns the culprit from the fault rank 2 recorded.
func TestKilledRankNamed(t *testing.T) {
	for _, elems := range []int{16, 1 << 17} { // the latency path, the pipelined one
		t.Run(fmt.Sprintf("%d floats", elems), func(t *testing.T) {
			res := proctest.Run(t, proctest.Options{Worker: fmt.Sprintf("kill:%d", elems), World: 4, Timeout: 90 * time.Second, KeepGoing: true})
			want := fmt.Sprintf("rank %d (node 1, host %q)", procVictim, procHost(procVictim))
			for _, r := range res {
				if r.Rank == procVictim {
					require.Equal(t, -int(syscall.SIGKILL), r.Code, "rank %d was to be killed:\n%s", r.Rank, r.Output())
					continue
				}
				require.Zero(t, r.Code, "rank %d:\n%s", r.Rank, r.Output())
				t.Logf("rank %d: %s", r.Rank, strings.TrimSpace(r.Stdout))
				require.Contains(t, r.Stdout, "PEERS "+strconv.Itoa(procVictim), "rank %d blames another rank first:\n%s", r.Rank, r.Output())
				require.Contains(t, r.Stdout, want, "rank %d:\n%s", r.Rank, r.Output())
			}
		})
	}
}

// procWorker runs all-reduces on the 2x2 hier group until one fails, and
// prints "PEERS p,q" (OpError.Peers) and "ERROR <message>"; the victim
// kills itself in the middle of them.
func procWorker(name string) error {
	elems, err := strconv.Atoi(strings.TrimPrefix(name, "kill:"))
	if err != nil {
		return fmt.Errorf("worker %q: %w", name, err)
	}
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	ctx := context.Background()
	st, err := store.Dial(ctx, net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")), store.WithToken(os.Getenv("GODDP_TOKEN")))
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := hier.NewWithConfig(ctx, backend.Options{Rank: rank, Size: world, LocalRank: rank % 2, LocalSize: 2, Store: st,
		Token: os.Getenv("GODDP_TOKEN"), Timeout: 30 * time.Second, StallThreshold: -1},
		hier.Config{Host: procHost(rank), SmallBytes: 1024, SegmentBytes: 64 << 10})
	if err != nil {
		return err
	}
	defer g.Close()
	if rank == procVictim {
		time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	x := make([]float32, elems)
	for {
		err := g.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx)
		if err == nil {
			continue
		}
		var oe *backend.OpError
		if !errors.As(err, &oe) {
			return fmt.Errorf("not an OpError: %w", err)
		}
		peers := make([]string, len(oe.Peers))
		for i, p := range oe.Peers {
			peers[i] = strconv.Itoa(p)
		}
		fmt.Printf("PEERS %s\nERROR %v\n", strings.Join(peers, ","), err)
		return nil
	}
}
