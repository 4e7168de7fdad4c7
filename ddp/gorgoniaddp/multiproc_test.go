//go:build !cuda

package gorgoniaddp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/comm"
)

// The multi-process test re-executes this test binary as the ranks: with
// GODDP_GORGONIA_WORKER set, TestMain trains one rank instead of running the
// tests. Ranks get the environment a launcher gives (RANK, WORLD_SIZE), meet
// through comm.InitFromEnv at a file:// store and talk over loopback TCP.
const (
	workerEnv = "GODDP_GORGONIA_WORKER" // the file the worker writes its weights to
)

func TestMain(m *testing.M) {
	if out := os.Getenv(workerEnv); out != "" {
		if err := workerMain(out); err != nil {
			fmt.Fprintf(os.Stderr, "gorgonia worker rank %s: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func workerMain(out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	hist, err := trainRank(pg, os.Getenv("GODDP_GORGONIA_SOLVER") == "1")
	if err != nil {
		pg.Close()
		return err
	}
	if err := pg.Close(); err != nil {
		return err
	}
	b, err := json.Marshal(hist)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// Two processes training the gorgonia graph under DDP over TCP follow
// single-process gorgonia training on the concatenated batch.
func TestMultiProcessEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ref, err := trainGorgonia(0, nSamples)
	require.NoError(t, err)
	for _, solver := range []string{"0", "1"} {
		t.Run("solver="+solver, func(t *testing.T) {
			const world = 2
			dir := t.TempDir()
			cmds := make([]*exec.Cmd, world)
			stderr := make([]*lockedBuffer, world)
			for r := range world {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(),
					workerEnv+"="+filepath.Join(dir, "rank"+strconv.Itoa(r)+".json"),
					"GODDP_GORGONIA_SOLVER="+solver,
					"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
					"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(world),
					"GODDP_BACKEND=tcp", "GODDP_INIT_METHOD=file://"+filepath.Join(dir, "store"),
					"GODDP_TIMEOUT=60s", "GODDP_TOKEN=gorgonia-test")
				stderr[r] = &lockedBuffer{}
				cmd.Stderr = stderr[r]
				require.NoError(t, cmd.Start())
				cmds[r] = cmd
			}
			done := make(chan []error, 1)
			go func() {
				errs := make([]error, world)
				for r, c := range cmds {
					errs[r] = c.Wait()
				}
				done <- errs
			}()
			select {
			case errs := <-done:
				for r, err := range errs {
					require.NoError(t, err, "rank %d stderr:\n%s", r, stderr[r].String())
				}
			case <-time.After(120 * time.Second):
				for _, c := range cmds {
					c.Process.Kill()
				}
				t.Fatalf("workers hung; stderr:\n%s\n%s", stderr[0].String(), stderr[1].String())
			}
			var hists [world][][][]float32
			for r := range world {
				b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(r)+".json"))
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &hists[r]))
				assert.NoError(t, closeTo(hists[r], ref, 1e-5), "rank %d", r)
			}
			assert.Equal(t, hists[0], hists[1], "ranks must agree bit for bit")
		})
	}
}
