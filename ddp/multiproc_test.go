package ddp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/goddp/goddp/internal/proctest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
)

// The multi-process tests re-execute this test binary as the workers
// through internal/proctest: TestMain runs one rank of the scenario
// proctest names ("equiv:<name>", "join:<name>", "kill:", "bench:...")
// instead of the tests. Ranks meet through comm.InitFromEnv (the store the
// test hosts, or GODDP_INIT_METHOD) and talk over loopback (tcp backend) or
// shared memory (shm backend); each writes its parameters as JSON to
// rank<RANK>.json in GODDP_PROCTEST_DIR.

func TestMain(m *testing.M) { proctest.MainFunc(m, workerMain) }

// workerOut is where this worker writes its parameters.
func workerOut() string {
	return filepath.Join(os.Getenv("GODDP_PROCTEST_DIR"), "rank"+os.Getenv("RANK")+".json")
}

func workerMain(scenario string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer pg.Close()
	kind, name, _ := strings.Cut(scenario, ":")
	var params [][]float32
	switch kind {
	case "equiv":
		for _, tc := range equivCases {
			if tc.Name == name {
				params, err = ddpTrain(tc, pg)
			}
		}
	case "kill":
		// Rank 1 dies by SIGKILL in the middle of training; rank 0 must
		// fail with an error naming it instead of hanging.
		tc := equivCases[0]
		tc.Steps = 1 << 20
		if err := pg.Barrier().Wait(ctx); err != nil {
			return err
		}
		if pg.Rank() == 1 {
			go func() {
				time.Sleep(300 * time.Millisecond)
				p, _ := os.FindProcess(os.Getpid())
				_ = p.Kill()
			}()
		}
		_, err = ddpTrain(tc, pg)
		if err == nil {
			return errors.New("training survived a dead peer")
		}
		return fmt.Errorf("training failed as expected: %w", err)
	case "shmgrow":
		return shmGrowWorker(ctx, pg)
	case "bench":
		if err := benchWorker(pg, name); err != nil {
			return err
		}
		return pg.Barrier().Wait(ctx)
	case "join":
		for _, tc := range joinCases {
			if tc.Name == name {
				params, err = joinTrain(tc, pg)
			}
		}
	}
	if err != nil {
		return err
	}
	if params == nil {
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	if err := pg.Barrier().Wait(ctx); err != nil {
		return fmt.Errorf("final barrier: %w", err)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return os.WriteFile(workerOut(), b, 0o644)
}

// workerEnv is the environment of every rank of a world on backend.
func workerEnv(backend string) []string {
	return []string{"GODDP_BACKEND=" + backend, "GODDP_TIMEOUT=60s", "GODDP_NUM_THREADS=1"}
}

// runWorkers starts world processes of this binary on scenario and returns
// each rank's parameters.
func runWorkers(t *testing.T, scenario, backend string, world int) [][][]float32 {
	t.Helper()
	w := proctest.Start(t, proctest.Options{Worker: scenario, World: world, Env: workerEnv(backend)})
	proctest.RequireSuccess(t, w.Wait())
	out := make([][][]float32, world)
	for r := range world {
		b, err := os.ReadFile(filepath.Join(w.Dir, fmt.Sprintf("rank%d.json", r)))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &out[r]))
	}
	return out
}

func TestMultiProcessEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	type run struct {
		tc      equivCase
		backend string
		world   int
	}
	var runs []run
	for _, tc := range equivCases {
		runs = append(runs, run{tc, "tcp", 2})
	}
	runs = append(runs, run{equivCases[0], "tcp", 3}, run{equivCases[2], "shm", 2}, run{equivCases[3], "shm", 3})
	for _, rn := range runs {
		t.Run(fmt.Sprintf("%s/%s/world%d", rn.tc.Name, rn.backend, rn.world), func(t *testing.T) {
			want, err := referenceTrain(rn.tc, rn.world)
			require.NoError(t, err)
			got := runWorkers(t, "equiv:"+rn.tc.Name, rn.backend, rn.world)
			for r := range got {
				requireClose(t, want, got[r], rn.tc.Tol, fmt.Sprintf("rank %d", r))
			}
		})
	}
}

func TestMultiProcessJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, tc := range []joinCase{joinCases[0], joinCases[1], joinCases[3]} {
		t.Run(tc.Name, func(t *testing.T) {
			want, err := joinReference(tc)
			require.NoError(t, err)
			got := runWorkers(t, "join:"+tc.Name, "tcp", len(tc.Batches))
			for r := range got {
				requireClose(t, want, got[r], tc.Tol, fmt.Sprintf("rank %d", r))
			}
		})
	}
}

func TestMultiProcessDeadPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, backend := range []string{"tcp", "shm"} {
		t.Run(backend, func(t *testing.T) {
			start := time.Now()
			res := proctest.Run(t, proctest.Options{Worker: "kill:", World: 2, Env: workerEnv(backend), KeepGoing: true, Timeout: time.Minute})
			require.NotZero(t, res[0].Code, "rank 0 must fail")
			out := res[0].Output()
			require.Contains(t, out, "training failed as expected", out)
			require.Contains(t, out, "rank 1", out)
			// The group timeout is 60 s; a dead peer must be noticed long before.
			require.Less(t, time.Since(start), 30*time.Second)
		})
	}
}
