package ddp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"goddp/comm"
)

// The multi-process tests re-execute this test binary as the workers: with
// GODDP_DDP_WORKER set, TestMain runs one rank of a scenario instead of the
// tests. Ranks meet through a file:// store in a temporary directory and
// talk over loopback (tcp backend) or shared memory (shm backend).
const (
	workerEnv   = "GODDP_DDP_WORKER"  // scenario: "equiv:<name>" or "join:<name>"
	workerOut   = "GODDP_DDP_OUT"     // where the worker writes its parameters (JSON)
	workerStore = "GODDP_DDP_STORE"   // file store path
	workerRank  = "GODDP_DDP_RANK"    //
	workerSize  = "GODDP_DDP_WORLD"   //
	workerBack  = "GODDP_DDP_BACKEND" // comm backend
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		if err := workerMain(); err != nil {
			fmt.Fprintf(os.Stderr, "ddp worker rank %s: %v\n", os.Getenv(workerRank), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func workerMain() error {
	rank, err := strconv.Atoi(os.Getenv(workerRank))
	if err != nil {
		return err
	}
	world, err := strconv.Atoi(os.Getenv(workerSize))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := comm.Init(ctx, comm.Config{
		Backend:    os.Getenv(workerBack),
		InitMethod: "file://" + os.Getenv(workerStore),
		Rank:       rank,
		WorldSize:  world,
		Timeout:    60 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer pg.Close()
	kind, name, _ := strings.Cut(os.Getenv(workerEnv), ":")
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
		if rank == 1 {
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
		return fmt.Errorf("unknown scenario %q", os.Getenv(workerEnv))
	}
	if err := pg.Barrier().Wait(ctx); err != nil {
		return fmt.Errorf("final barrier: %w", err)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return os.WriteFile(os.Getenv(workerOut), b, 0o644)
}

// runWorkers starts world processes of this binary on scenario and returns
// each rank's parameters.
func runWorkers(t *testing.T, scenario, backend string, world int) [][][]float32 {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([][][]float32, world)
	errs := make([]error, world)
	logs := make([]strings.Builder, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			workerEnv+"="+scenario,
			workerOut+"="+filepath.Join(dir, fmt.Sprintf("rank%d.json", r)),
			workerStore+"="+filepath.Join(dir, "store"),
			workerRank+"="+strconv.Itoa(r),
			workerSize+"="+strconv.Itoa(world),
			workerBack+"="+backend,
			"GODDP_NUM_THREADS=1",
		)
		cmd.Stdout = &logs[r]
		cmd.Stderr = &logs[r]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = cmd.Wait()
		}(r)
	}
	wg.Wait()
	for r := 0; r < world; r++ {
		require.NoError(t, errs[r], "rank %d output:\n%s", r, logs[r].String())
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", r)))
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
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var logs [2]strings.Builder
			cmds := make([]*exec.Cmd, 2)
			for r := range cmds {
				cmds[r] = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
				cmds[r].Env = append(os.Environ(), workerEnv+"=kill:", workerOut+"="+filepath.Join(dir, "out"),
					workerStore+"="+filepath.Join(dir, "store"), workerRank+"="+strconv.Itoa(r),
					workerSize+"=2", workerBack+"="+backend)
				cmds[r].Stdout, cmds[r].Stderr = &logs[r], &logs[r]
				require.NoError(t, cmds[r].Start())
			}
			start := time.Now()
			err0 := cmds[0].Wait()
			_ = cmds[1].Wait()
			require.Error(t, err0, "rank 0 must fail")
			out := logs[0].String()
			require.Contains(t, out, "training failed as expected", out)
			require.Contains(t, out, "rank 1", out)
			// The group timeout is 60 s; a dead peer must be noticed long before.
			require.Less(t, time.Since(start), 30*time.Second)
		})
	}
}
