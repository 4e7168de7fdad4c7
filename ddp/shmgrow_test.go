package ddp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/internal/proctest"
)

// Wrapping and closing a growing model again and again with
// GradientAsBucketView (the trainer's default; on shm the buckets live in
// /dev/shm) must hold about one model's buckets in /dev/shm, not the sum
// of every model so far: the issue saw 8.8 MB grow to 1.70 GB in 40
// cycles. The bar: after 40 cycles on 2 processes, what a rank holds in
// /dev/shm (the segment and the buckets of every rank, since each rank
// maps all of them) is at most twice the largest model's buckets; and
// from one cycle to the next it never grows past twice the buckets of the
// largest model so far, which catches the leak before it fills /dev/shm.

const (
	growCycles = 40
	growStep   = 64 << 10 // float32 parameters added each cycle: 256 KB of buckets per rank
)

func TestShmWrapCloseGrowingModel(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	res := proctest.Run(t, proctest.Options{Worker: "shmgrow:", World: 2, Env: workerEnv("shm"), Timeout: 2 * time.Minute})
	for _, r := range res {
		t.Logf("rank %d:\n%s", r.Rank, strings.TrimSpace(r.Stdout))
	}
	proctest.RequireSuccess(t, res)
}

// shmGrowWorker is one rank of TestShmWrapCloseGrowingModel.
func shmGrowWorker(ctx context.Context, pg comm.ProcessGroup) error {
	base, err := shmHeld()
	if err != nil {
		return err
	}
	world := int64(pg.Size())
	var largest, peak int64 // the largest model's buckets (every rank's), the most held
	for i := 1; i <= growCycles; i++ {
		n := i * growStep
		net := dotNet([][]int{{n / 2}, {n - n/2}})
		d, err := Wrap(ctx, net, pg, GradientAsBucketView(true))
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i, err)
		}
		if got := d.Stats().Reduction; got != "shared buckets" {
			return fmt.Errorf("cycle %d: Reduction %q, want shared buckets", i, got)
		}
		loss, err := d.ForwardFunc(func() *autograd.Variable {
			var ts []*autograd.Variable
			for k, p := range net.params {
				ts = append(ts, dot(p, constant(float32(pg.Rank()+k), p.Value.Shape()...)))
			}
			return addAll(ts...)
		})
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return fmt.Errorf("cycle %d: backward: %w", i, err)
		}
		// Every rank has allocated this cycle's buckets and freed the
		// last: measure between two barriers.
		if err := pg.Barrier().Wait(ctx); err != nil {
			return err
		}
		held, err := shmHeld()
		if err != nil {
			return err
		}
		if err := pg.Barrier().Wait(ctx); err != nil {
			return err
		}
		largest, peak = max(largest, world*int64(n)*4), max(peak, held)
		fmt.Printf("cycle %2d: buckets %5.1f MB, /dev/shm held %6.1f MB, Shmem (whole host) %6.1f MB\n",
			i, float64(world*int64(n)*4)/1e6, float64(held)/1e6, float64(meminfoShmem())/1e6)
		if held-base > 2*largest {
			return fmt.Errorf("cycle %d: /dev/shm held grew by %.1f MB, past twice the largest model's buckets (%.1f MB)",
				i, float64(held-base)/1e6, float64(largest)/1e6)
		}
		if err := d.Close(); err != nil {
			return fmt.Errorf("cycle %d: close: %w", i, err)
		}
	}
	fmt.Printf("%d cycles: /dev/shm held at most %.1f MB (%.1f MB before the first Wrap), largest model's buckets %.1f MB\n",
		growCycles, float64(peak)/1e6, float64(base)/1e6, float64(largest)/1e6)
	if peak > 2*largest {
		return fmt.Errorf("%d cycles: /dev/shm held %.1f MB, past twice the largest model's buckets (%.1f MB)",
			growCycles, float64(peak)/1e6, float64(largest)/1e6)
	}
	return nil
}

// meminfoShmem is the host's Shmem (/proc/meminfo), for the log: other
// processes' shared memory counts too, so the test bounds shmHeld instead.
func meminfoShmem() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Shmem:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// shmHeld is what this process holds in /dev/shm: the allocated bytes of
// every file there that it maps or has open, each once (an unlinked file
// holds its pages while mapped).
func shmHeld() (int64, error) {
	seen := map[[2]uint64]bool{}
	var total int64
	for _, d := range []string{"/proc/self/map_files", "/proc/self/fd"} {
		ents, err := os.ReadDir(d)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			target, err := os.Readlink(p)
			if err != nil || !strings.HasPrefix(target, "/dev/shm/") {
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
	return total, nil
}
