package shm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
)

// A rank 0 killed during set-up (its peer never mapped the segment) or
// during an AllocShared leaves its file in /dev/shm; the next group
// created on the host removes it, and SweepDead finds nothing left.
func TestShmKilledCreatorsFilesSwept(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	for _, mode := range []string{"segment", "arena"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestShmOrphanWorker$", "-test.count=1")
			cmd.Env = append(os.Environ(), "GODDP_SHM_ORPHAN="+mode)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			pid := cmd.Process.Pid
			made := func() bool { // the file the child waits with
				for _, f := range orphanFiles(t, pid) {
					if strings.HasSuffix(f, "-arena") == (mode == "arena") {
						return true
					}
				}
				return false
			}
			deadline := time.Now().Add(20 * time.Second)
			for !made() {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("no %s file of pid %d appeared\n%s", mode, pid, out.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Kill())
			cmd.Wait()
			require.NotEmpty(t, orphanFiles(t, pid), "the killed creator's files are there until someone sweeps")

			// The next group on the host removes them.
			for r, err := range shmWorld(t, 1, 5*time.Second, func(context.Context, backend.ProcessGroup) error { return nil }) {
				require.NoError(t, err, "rank %d", r)
			}
			assert.Empty(t, orphanFiles(t, pid), "files of the killed creator left after the next group's set-up")
			removed, err := SweepDead()
			require.NoError(t, err)
			for _, p := range removed {
				assert.NotContains(t, p, fmt.Sprintf("goddp-shm-%d-", pid))
			}
		})
	}
}

// orphanFiles lists the files in /dev/shm that pid created.
func orphanFiles(t *testing.T, pid int) []string {
	t.Helper()
	m, err := filepath.Glob(fmt.Sprintf("%s/goddp-shm-%d-*", shmDir, pid))
	require.NoError(t, err)
	return m
}

// TestShmOrphanWorker is the process TestShmKilledCreatorsFilesSwept kills:
// rank 0 of a world whose other rank never answers, waiting with its file
// created. A no-op unless GODDP_SHM_ORPHAN is set.
func TestShmOrphanWorker(t *testing.T) {
	mode := os.Getenv("GODDP_SHM_ORPHAN")
	if mode == "" {
		t.Skip("only runs as the child of TestShmKilledCreatorsFilesSwept")
	}
	ctx := context.Background()
	switch mode {
	case "segment":
		// Rank 1 never comes: rank 0 waits for it with the segment made.
		_, err := New(ctx, backend.Options{Rank: 0, Size: 2, Store: commtest.NewStore(), Timeout: time.Minute})
		t.Fatalf("set-up ended: %v", err)
	case "arena":
		shmWorld(t, 2, time.Minute, func(ctx context.Context, g backend.ProcessGroup) error {
			if g.Rank() == 0 {
				_, err := g.(*shmGroup).AllocShared(ctx, 1<<20)
				return err
			}
			time.Sleep(time.Minute) // never joins the allocation
			return nil
		})
		t.Fatal("the allocation ended")
	}
}

// shmHeld is what this process holds in /dev/shm: the allocated bytes of
// every file it maps or has open there, each file once (an unlinked file
// still holds its pages while mapped).
func shmHeld(t *testing.T) int64 {
	t.Helper()
	seen := map[[2]uint64]bool{}
	var total int64
	for _, d := range []string{"/proc/self/map_files", "/proc/self/fd"} {
		ents, err := os.ReadDir(d)
		require.NoError(t, err)
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			target, err := os.Readlink(p)
			if err != nil || !strings.HasPrefix(target, shmDir+"/") {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(p, &st) != nil || seen[[2]uint64{st.Dev, st.Ino}] {
				continue
			}
			seen[[2]uint64{st.Dev, st.Ino}] = true
			total += st.Blocks * 512
		}
	}
	return total
}

// Allocating ever larger shared buffers, each freed before the next (DDP
// re-wrapping a growing model), holds about the live buffer in /dev/shm,
// not the sum of every buffer so far: FreeShared gives the pages back.
func TestShmFreeSharedReleasesPages(t *testing.T) {
	const world, cycles, step = 2, 16, 256 << 10
	var held, bound []int64
	errs := shmWorld(t, world, 30*time.Second, func(ctx context.Context, pg backend.ProcessGroup) error {
		g := pg.(*shmGroup)
		var base int64
		if g.Rank() == 0 {
			base = shmHeld(t) // the segment, and what earlier tests left mapped
		}
		for i := 1; i <= cycles; i++ {
			size := i * step
			b, err := g.AllocShared(ctx, size)
			if err != nil {
				return err
			}
			for j := range b {
				b[j] = byte(j)
			}
			if err := g.Barrier().Wait(ctx); err != nil {
				return err
			}
			if g.Rank() == 0 {
				held = append(held, shmHeld(t)-base)
				bound = append(bound, int64(2*world*size))
			}
			if err := g.Barrier().Wait(ctx); err != nil {
				return err
			}
			if err := g.FreeShared(b); err != nil {
				return err
			}
		}
		// A buffer freed and allocated again still works, cleared.
		b, err := g.AllocShared(ctx, step)
		if err != nil {
			return err
		}
		for j, v := range b {
			if v != 0 {
				return fmt.Errorf("reused buffer not cleared at %d", j)
			}
			if j%8 == 0 {
				b[j] = byte(g.Rank() + 1) // int64 rank+1, little-endian
			}
		}
		x := backend.Buffer{DType: backend.Int64, Bytes: b}
		if err := g.AllReduce(x, backend.Sum).Wait(ctx); err != nil {
			return err
		}
		if b[0] != 3 || b[len(b)-8] != 3 {
			return fmt.Errorf("all-reduce in a reused buffer gave %d", b[0])
		}
		return g.FreeShared(b)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	t.Logf("held in /dev/shm per cycle (MB): %v", mb(held))
	for i := range held {
		require.LessOrEqual(t, held[i], bound[i], "cycle %d: %.1f MB held for a live buffer of %.1f MB per rank", i+1,
			float64(held[i])/1e6, float64(bound[i])/2/world/1e6)
	}
}

func mb(xs []int64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.1f", float64(x)/1e6)
	}
	return out
}
