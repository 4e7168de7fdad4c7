package comm

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/internal/proctest"
	"net"
	"testing"
	"time"
)

// Multi-process tests re-execute this test binary as worker processes
// through internal/proctest: TestMain runs the named worker with the rank
// environment a launcher would give.
func TestMain(m *testing.M) {
	workers := map[string]func() error{}
	for name, fn := range testWorkers {
		workers[name] = func() error { return runTestWorker(fn) }
	}
	for name, fn := range rawWorkers {
		workers[name] = fn
	}
	proctest.Main(m, workers)
}

var testWorkers = map[string]func(ctx context.Context, pg ProcessGroup) error{
	// cases runs the whole collective table and checks every result.
	"cases": func(ctx context.Context, pg ProcessGroup) error {
		_, err := commtest.RunCases(ctx, pg, commtest.Cases(pg.Size(), []int{0, 1, 7, 1000, 4099}, 100_003))
		return err
	},
	// loop all-reduces until something fails; the parent kills one rank
	// once every rank has printed "ready".
	"loop": func(ctx context.Context, pg ProcessGroup) error {
		buf := make([]float32, 1<<18)
		for i := 0; ; i++ {
			if err := pg.AllReduce(Float32s(buf), Sum).Wait(ctx); err != nil {
				return err
			}
			if i == 3 {
				fmt.Println("ready")
			}
		}
	},
}

// runTestWorker joins the job from the environment and runs fn.
func runTestWorker(fn func(ctx context.Context, pg ProcessGroup) error) error {
	ctx := context.Background()
	pg, err := InitFromEnv(ctx)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := fn(ctx, pg); err != nil {
		pg.Close()
		return err
	}
	return pg.Close()
}

// spawnWorld starts world worker processes running the named worker over tcp.
func spawnWorld(t *testing.T, name string, world int, keepGoing bool, env ...string) *proctest.World {
	t.Helper()
	return proctest.Start(t, proctest.Options{Worker: name, World: world, Timeout: 90 * time.Second, KeepGoing: keepGoing,
		Env: append([]string{"GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s"}, env...)})
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
