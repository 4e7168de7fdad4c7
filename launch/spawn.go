package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// SpawnFunc is the body of one worker started by Spawn.
type SpawnFunc func(ctx context.Context, rank, worldSize int) error

// SpawnOption configures Spawn.
type SpawnOption func(*Config)

// WithSpawnEnv adds KEY=VALUE pairs to the workers' environment.
func WithSpawnEnv(kv ...string) SpawnOption {
	return func(c *Config) { c.Env = append(c.Env, kv...) }
}

// WithSpawnOutput sends the workers' stdout and stderr (default: this
// process's) and the supervisor's messages (default: discarded) to writers.
func WithSpawnOutput(stdout, stderr, log io.Writer) SpawnOption {
	return func(c *Config) { c.Stdout, c.Stderr, c.Log = stdout, stderr, log }
}

// WithSpawnMaxRestarts restarts the whole group up to n times after a failure.
func WithSpawnMaxRestarts(n int) SpawnOption {
	return func(c *Config) { c.MaxRestarts = n }
}

// WithSpawnStopGrace sets the time between SIGTERM and SIGKILL.
func WithSpawnStopGrace(d time.Duration) SpawnOption {
	return func(c *Config) { c.StopGrace = d }
}

// Spawn is torch.multiprocessing.spawn for Go: it runs fn in nprocs new
// processes, each a re-execution of the current binary with the same
// arguments and the worker environment ddprun sets (RANK, WORLD_SIZE,
// MASTER_ADDR/MASTER_PORT of a store Spawn hosts, GODDP_TOKEN, ...), and
// waits for all of them. If one fails, the others are stopped and Spawn
// returns a *FailureError naming the rank, its exit code and its error
// (what fn returned, recorded with RecordError).
//
// The child processes find fn by its name, so the program must hand fn to
// RunChild before doing anything else, in main or in TestMain:
//
//	func TestMain(m *testing.M) {
//		if launch.IsChild() {
//			os.Exit(launch.RunChild(context.Background(), worker))
//		}
//		os.Exit(m.Run())
//	}
//
// fn must be a top-level function (a closure's captured variables do not
// exist in the child).
func Spawn(ctx context.Context, fn SpawnFunc, nprocs int, opts ...SpawnOption) error {
	if IsChild() {
		return usagef("Spawn called inside a spawned child (%s=%s): main or TestMain must call "+
			"launch.IsChild and launch.RunChild before anything else", envSpawnFunc, os.Getenv(envSpawnFunc))
	}
	if fn == nil || nprocs < 1 {
		return usagef("Spawn needs a function and nprocs >= 1, got nprocs %d", nprocs)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: cannot find the current binary: %w", ErrProgram, err)
	}
	cfg := Config{
		Program: exe, Args: os.Args[1:], NProcPerNode: nprocs, Standalone: true,
		Env: []string{envSpawnFunc + "=" + funcName(fn)},
		Log: io.Discard, StopGrace: 2 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return Run(ctx, cfg)
}

// IsChild reports whether this process was started by Spawn.
func IsChild() bool { return os.Getenv(envSpawnFunc) != "" }

// RunChild runs, in a process started by Spawn, the function Spawn was
// given (found by name among fns) with this process's rank, and returns
// the exit code for os.Exit: 0 on success, 1 when fn returned an error,
// 2 when it panicked or was not among fns. Errors and panics are written
// to the error file, so the parent reports them as the root cause.
func RunChild(ctx context.Context, fns ...SpawnFunc) (code int) {
	name := os.Getenv(envSpawnFunc)
	rank, world := envInt(EnvRank, 0), envInt(EnvWorldSize, 1)
	var fn SpawnFunc
	var have []string
	for _, f := range fns {
		n := funcName(f)
		have = append(have, n)
		if n == name {
			fn = f
		}
	}
	if fn == nil {
		err := fmt.Errorf("launch: spawned child wants %q, which was not passed to RunChild (have: %s)", name, strings.Join(have, ", "))
		_ = RecordError(err)
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() {
		if r := recover(); r != nil {
			_ = writeErrorRecord(fmt.Sprintf("panic: %v", r), string(debug.Stack()))
			fmt.Fprintf(os.Stderr, "rank %d: panic: %v\n%s", rank, r, debug.Stack())
			code = 2
		}
	}()
	if err := fn(ctx, rank, world); err != nil {
		_ = RecordError(err)
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
		return 1
	}
	return 0
}

func funcName(fn SpawnFunc) string {
	if f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()); f != nil {
		return f.Name()
	}
	return ""
}
