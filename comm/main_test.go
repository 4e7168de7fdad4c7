package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Multi-process tests re-execute this test binary as worker processes:
// TestMain sees GODDP_TEST_WORKER, runs the named worker with the rank
// environment a launcher would give, and exits 0 on success, 3 on failure
// (with the error on stderr).
func TestMain(m *testing.M) {
	if name := os.Getenv("GODDP_TEST_WORKER"); name != "" {
		os.Exit(runTestWorker(name))
	}
	os.Exit(m.Run())
}

var testWorkers = map[string]func(ctx context.Context, pg ProcessGroup) error{
	// cases runs the whole collective table and checks every result.
	"cases": func(ctx context.Context, pg ProcessGroup) error {
		_, err := runCases(ctx, pg, collCases(pg.Size(), []int{0, 1, 7, 1000, 4099}, 100_003))
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

func runTestWorker(name string) int {
	fn := testWorkers[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown test worker %q\n", name)
		return 2
	}
	ctx := context.Background()
	pg, err := InitFromEnv(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "init: %v\n", err)
		return 3
	}
	if err := fn(ctx, pg); err != nil {
		fmt.Fprintf(os.Stderr, "worker error: %v\n", err)
		pg.Close()
		return 3
	}
	if err := pg.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close: %v\n", err)
		return 3
	}
	return 0
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

// worker is one spawned rank process.
type worker struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
}

// spawnWorld starts world worker processes running the named worker.
func spawnWorld(t *testing.T, name string, world int, env ...string) []*worker {
	t.Helper()
	port := freePort(t)
	ws := make([]*worker, world)
	for r := range world {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			"GODDP_TEST_WORKER="+name,
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"GODDP_TOKEN=test-token", "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s")
		cmd.Env = append(cmd.Env, env...)
		w := &worker{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
		cmd.Stdout, cmd.Stderr = w.stdout, w.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws[r] = w
	}
	t.Cleanup(func() {
		for _, w := range ws {
			if w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		}
	})
	return ws
}

// waitAll waits for every worker up to limit and returns their exit codes.
func waitAll(t *testing.T, ws []*worker, limit time.Duration) []int {
	t.Helper()
	codes := make([]int, len(ws))
	done := make(chan struct{})
	go func() {
		for i, w := range ws {
			err := w.cmd.Wait()
			codes[i] = 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				codes[i] = ee.ExitCode()
				if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
					codes[i] = -int(st.Signal())
				}
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		var b strings.Builder
		for r, w := range ws {
			fmt.Fprintf(&b, "rank %d stderr:\n%s\n", r, w.stderr.String())
		}
		t.Fatalf("workers still running after %v (a hang)\n%s", limit, b.String())
	}
	return codes
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
