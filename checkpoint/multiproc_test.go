package checkpoint

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/internal/proctest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/comm"
)

// TestMultiProcessChild is one rank of TestMultiProcessSaveAndLoad, which
// runs it through internal/proctest.
func TestMultiProcessChild(t *testing.T) {
	if os.Getenv(proctest.WorkerEnv) != "ckpt" {
		t.Skip("child process of TestMultiProcessSaveAndLoad")
	}
	if err := mpChild(); err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("rank-ok")
}

func mpChild() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	rank := pg.Rank()
	dir := filepath.Join(os.Getenv("GODDP_PROCTEST_DIR"), "ckpt")
	if rank != 0 {
		dir = filepath.Join(dir, fmt.Sprint("rank", rank)) // only rank 0 sees the real directory
	}
	m, err := NewManager(dir)
	if err != nil {
		return err
	}
	var c *Checkpoint
	if rank == 0 {
		c = fullCheckpoint(7, 448)
	}
	path, err := SaveOnRank0(ctx, pg, m, c)
	if err != nil {
		return err
	}
	if filepath.Base(path) != "ckpt-e00000007-s000000000448.safetensors" {
		return fmt.Errorf("rank %d: path %s", rank, path)
	}
	got, err := LoadLatestAndBroadcast(ctx, pg, m)
	if err != nil {
		return err
	}
	if got.Epoch != 7 || got.Step != 448 || got.Model["0.weight"].F32()[3] != 4 || got.Sampler.Position != 96 {
		return fmt.Errorf("rank %d: wrong checkpoint %+v", rank, got)
	}
	return nil
}

// TestMultiProcessSaveAndLoad runs SaveOnRank0 and LoadLatestAndBroadcast in
// two real processes joined by goddp/comm on loopback.
func TestMultiProcessSaveAndLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, backend := range []string{"tcp", "shm"} {
		t.Run(backend, func(t *testing.T) {
			res := proctest.Run(t, proctest.Options{Worker: "ckpt", World: 2, Timeout: 90 * time.Second,
				Args: []string{"-test.run=^TestMultiProcessChild$", "-test.count=1"},
				Env:  []string{"GODDP_BACKEND=" + backend, "GODDP_TIMEOUT=30s"}})
			proctest.RequireSuccess(t, res)
			for _, r := range res {
				assert.Contains(t, r.Stdout, "rank-ok", "rank %d", r.Rank)
			}
		})
	}
}
