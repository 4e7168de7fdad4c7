//go:build !cuda

package gorgoniaddp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/goddp/goddp/internal/proctest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
)

// The multi-process test re-executes this test binary as the ranks through
// internal/proctest: TestMain trains one rank instead of running the tests.
// Ranks meet through comm.InitFromEnv at the store the test hosts and talk
// over loopback TCP; each writes its weight history to rank<RANK>.json in
// GODDP_PROCTEST_DIR.
func TestMain(m *testing.M) { proctest.Main(m, map[string]func() error{"train": workerMain}) }

func workerMain() error {
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
	return os.WriteFile(filepath.Join(os.Getenv("GODDP_PROCTEST_DIR"), "rank"+os.Getenv("RANK")+".json"), b, 0o644)
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
			w := proctest.Start(t, proctest.Options{Worker: "train", World: world, Timeout: 120 * time.Second,
				Env: []string{"GODDP_GORGONIA_SOLVER=" + solver, "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s"}})
			proctest.RequireSuccess(t, w.Wait())
			dir := w.Dir
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
