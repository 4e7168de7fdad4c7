package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/comm"
)

const mpRankEnv = "GODDP_CKPT_MP_RANK"

// TestMultiProcessChild is one rank of TestMultiProcessSaveAndLoad.
func TestMultiProcessChild(t *testing.T) {
	rs := os.Getenv(mpRankEnv)
	if rs == "" {
		t.Skip("child process of TestMultiProcessSaveAndLoad")
	}
	if err := mpChild(rs); err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("rank-ok")
}

func mpChild(rs string) error {
	rank, _ := strconv.Atoi(rs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := comm.Init(ctx, comm.Config{Backend: os.Getenv("GODDP_CKPT_MP_BACKEND"), InitMethod: "file://" + os.Getenv("GODDP_CKPT_MP_STORE"),
		Rank: rank, WorldSize: 2, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer pg.Close()
	dir := os.Getenv("GODDP_CKPT_MP_DIR")
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
			tmp := t.TempDir()
			var wg sync.WaitGroup
			outs := make([][]byte, 2)
			errs := make([]error, 2)
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1")
					cmd.Env = append(os.Environ(), mpRankEnv+"="+strconv.Itoa(r),
						"GODDP_CKPT_MP_BACKEND="+backend,
						"GODDP_CKPT_MP_STORE="+filepath.Join(tmp, "store"),
						"GODDP_CKPT_MP_DIR="+filepath.Join(tmp, "ckpt"))
					outs[r], errs[r] = cmd.CombinedOutput()
				}()
			}
			wg.Wait()
			for r := range 2 {
				require.NoError(t, errs[r], "rank %d:\n%s", r, outs[r])
				assert.Contains(t, string(outs[r]), "rank-ok", "rank %d", r)
			}
		})
	}
}
