package launch

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunStandaloneEnv(t *testing.T) {
	cfg, out, errb := testConfig(3)
	cfg.Env = []string{EnvToken + "=sekrit-token-value", EnvNumThreads + "="}
	require.NoError(t, Run(context.Background(), cfg), errb.String())
	rs := reports(out.String(), "start")
	require.Len(t, rs, 3, out.String())
	port := rs[0].str("MASTER_PORT")
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.str("RANK")] = true
		assert.Equal(t, r.str("RANK"), r.str("LOCAL_RANK"))
		assert.Equal(t, r.str("RANK"), r.str("ROLE_RANK"))
		assert.Equal(t, "3", r.str("WORLD_SIZE"))
		assert.Equal(t, "3", r.str("LOCAL_WORLD_SIZE"))
		assert.Equal(t, "0", r.str("GROUP_RANK"))
		assert.Equal(t, "127.0.0.1", r.str("MASTER_ADDR"))
		assert.Equal(t, port, r.str("MASTER_PORT"))
		assert.Equal(t, "1", r.str("GODDP_STORE_HOSTED"))
		assert.Equal(t, "0", r.str("TORCHELASTIC_RESTART_COUNT"))
		assert.NotEmpty(t, r.str("TORCHELASTIC_RUN_ID"))
		assert.NotEmpty(t, r.str("GODDP_NUM_THREADS"))
		if n, err := strconv.Atoi(r.str("GODDP_NUM_THREADS")); err == nil && n < runtime.NumCPU() {
			assert.Equal(t, strconv.Itoa(min(n+1, runtime.NumCPU())), r.str("GOMAXPROCS"), "the rank's share of the cores and a P to spare")
		} else {
			assert.Empty(t, r.str("GOMAXPROCS"), "a rank with every core keeps Go's default")
		}
		assert.NotEmpty(t, r.str("token_hash"))
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true}, seen)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	assert.Greater(t, p, 0)
	assert.NotContains(t, out.String()+errb.String(), "sekrit-token-value")
}

func TestRunThreadsEnvRespected(t *testing.T) {
	cfg, out, errb := testConfig(2)
	cfg.Env = []string{EnvOMPThreads + "=7", EnvMaxProcs + "="}
	require.NoError(t, Run(context.Background(), cfg), errb.String())
	for _, r := range reports(out.String(), "start") {
		assert.Equal(t, "7", r.str("OMP_NUM_THREADS"))
		assert.Empty(t, r.str("GODDP_NUM_THREADS"))
		assert.Empty(t, r.str("GOMAXPROCS"), "the user chose the threads: GOMAXPROCS is left alone too")
	}
}

func TestMaxProcsFor(t *testing.T) {
	for _, c := range []struct {
		env           []string
		threads, ncpu int
		want          int
	}{
		{nil, 1, 2, 2},                      // 2 ranks on 2 cores: a P to spare
		{nil, 3, 16, 4},                     // 5 ranks on 16 cores
		{nil, 1, 4, 2},                      // 4 ranks on 4 cores
		{nil, 2, 2, 0},                      // one rank has the node: Go's default
		{nil, 0, 2, 0},                      // the user set the thread env
		{[]string{"GOMAXPROCS=2"}, 1, 2, 0}, // the user's GOMAXPROCS wins
		{[]string{"GOMAXPROCS=4", "GOMAXPROCS="}, 1, 2, 2}, // last value wins, as in exec
	} {
		assert.Equal(t, c.want, maxProcsFor(c.env, c.threads, c.ncpu), "%+v", c)
	}
}

func TestThreadsFor(t *testing.T) {
	share := max(1, runtime.NumCPU()/2)
	for _, c := range []struct {
		env  []string
		want int
	}{
		{nil, share},
		{[]string{"OMP_NUM_THREADS=3"}, 0},        // the user's count stands
		{[]string{"GODDP_NUM_THREADS=1"}, 0},      //
		{[]string{"OMP_NUM_THREADS="}, share},     // empty: no count asked for
		{[]string{"OMP_NUM_THREADS=many"}, share}, // not a count: the workers would ignore it too
		{[]string{"GODDP_NUM_THREADS=0", "OMP_NUM_THREADS=2"}, 0},
		{[]string{"OMP_NUM_THREADS=2", "OMP_NUM_THREADS="}, share}, // last value wins, as in exec
	} {
		assert.Equal(t, c.want, threadsFor(c.env, 2), "%q", c.env)
	}
}

func TestRunGeneratedTokenShared(t *testing.T) {
	cfg, out, errb := testConfig(2)
	t.Setenv(EnvToken, "")
	require.NoError(t, Run(context.Background(), cfg), errb.String())
	rs := reports(out.String(), "start")
	require.Len(t, rs, 2)
	assert.NotEmpty(t, rs[0].str("token_hash"))
	assert.Equal(t, rs[0].str("token_hash"), rs[1].str("token_hash"))
}

// TestRunWorkerFailure is the bar: one worker exits 3, the run ends
// within seconds, its stderr is shown, and no worker (or child of one) is left.
func TestRunWorkerFailure(t *testing.T) {
	cfg, out, errb := testConfig(3, "-mode", "child", "-fail-rank", "2", "-code", "3", "-delay", "500ms")
	logb := &syncBuffer{}
	cfg.Log = logb
	start := time.Now()
	err := Run(context.Background(), cfg)
	took := time.Since(start)
	require.ErrorIs(t, err, ErrWorkerFailed)
	assert.Equal(t, ExitWorkerFailed, ExitCode(err))
	assert.Less(t, took, 10*time.Second)
	var fe *FailureError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, 2, fe.Root.Rank)
	assert.Equal(t, 3, fe.Root.ExitCode)
	assert.Contains(t, logb.String(), "Root cause")
	assert.Contains(t, logb.String(), "exit code 3")

	pids := []int{}
	for _, r := range reports(out.String(), "start") {
		pids = append(pids, r.pid())
	}
	for _, r := range reports(out.String(), "child") {
		pids = append(pids, int(r["child_pid"].(float64)))
	}
	require.Len(t, pids, 6, out.String()+errb.String())
	for _, pid := range pids {
		assert.False(t, alive(pid), "pid %d survived", pid)
	}
}

func TestRunFailureShowsStderrAndErrorFile(t *testing.T) {
	tests := []struct {
		name, mode, want string
		code             int
	}{
		{"exit code", "fail", "boom, exiting with 3", 3},
		{"error file", "recorderr", "loss is NaN at step 7 (recorded)", 1},
		{"panic", "panic", "worker panics on purpose", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, errb := testConfig(2, "-mode", tc.mode, "-fail-rank", "1", "-delay", "100ms")
			logb := &syncBuffer{}
			cfg.Log = logb
			err := Run(context.Background(), cfg)
			var fe *FailureError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, 1, fe.Root.Rank)
			assert.Equal(t, tc.code, fe.Root.ExitCode)
			assert.Contains(t, logb.String(), tc.want)
			if tc.mode == "recorderr" {
				assert.Contains(t, errb.String(), "giving up")
			} else {
				assert.Contains(t, errb.String(), tc.want)
			}
			if tc.mode != "fail" {
				require.NotNil(t, fe.Root.Record)
				assert.Contains(t, fe.Root.Record.Message, tc.want)
			}
		})
	}
}

func TestRunRestarts(t *testing.T) {
	tests := []struct {
		name        string
		maxRestarts int
		until       string
		wantErr     bool
		wantStarts  int
	}{
		{"recovers on the second restart", 2, "2", false, 3 * 2},
		{"gives up after the limit", 1, "5", true, 2 * 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, out, errb := testConfig(2, "-mode", "restart", "-until", tc.until, "-fail-rank", "1", "-delay", "50ms")
			cfg.MaxRestarts = tc.maxRestarts
			cfg.Log = errb
			err := Run(context.Background(), cfg)
			if tc.wantErr {
				var fe *FailureError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.maxRestarts, fe.Restarts)
				assert.Equal(t, tc.maxRestarts, fe.Root.Attempt)
			} else {
				require.NoError(t, err, errb.String())
			}
			rs := reports(out.String(), "start")
			assert.Len(t, rs, tc.wantStarts)
			counts := map[string]int{}
			for _, r := range rs {
				counts[r.str("TORCHELASTIC_RESTART_COUNT")]++
				assert.Equal(t, strconv.Itoa(tc.maxRestarts), r.str("TORCHELASTIC_MAX_RESTARTS"))
			}
			for i := 0; i < tc.wantStarts/2; i++ {
				assert.Equal(t, 2, counts[strconv.Itoa(i)], "attempt %d", i)
			}
		})
	}
}

func TestRunForwardsSignal(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		code int
	}{
		{"SIGINT", syscall.SIGINT, 130},
		{"SIGTERM", syscall.SIGTERM, 143},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, out, errb := testConfig(2, "-mode", "sleep")
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				waitFor(t, func() bool { return len(reports(out.String(), "start")) == 2 })
				cancel(&SignalError{Signal: tc.sig})
			}()
			err := Run(ctx, cfg)
			require.ErrorIs(t, err, ErrInterrupted, errb.String())
			assert.Equal(t, tc.code, ExitCode(err))
			sigs := reports(out.String(), "signal")
			require.Len(t, sigs, 2, out.String())
			for _, r := range sigs {
				assert.Equal(t, tc.sig.String(), r.str("signal"))
			}
			for _, r := range reports(out.String(), "start") {
				assert.False(t, alive(r.pid()))
			}
		})
	}
}

func TestRunEscalatesToSIGKILL(t *testing.T) {
	cfg, out, _ := testConfig(2, "-mode", "fail", "-fail-rank", "0", "-delay", "300ms", "-ignore-term")
	cfg.StopGrace = 300 * time.Millisecond
	start := time.Now()
	err := Run(context.Background(), cfg)
	require.ErrorIs(t, err, ErrWorkerFailed)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Len(t, reports(out.String(), "signal"), 1, "rank 1 saw SIGTERM and ignored it")
	for _, r := range reports(out.String(), "start") {
		assert.False(t, alive(r.pid()))
	}
}

func TestRunBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	cache := t.TempDir()
	notExec := filepath.Join(t.TempDir(), "data.txt")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))

	tests := []struct {
		name string
		edit func(c *Config)
		want error
		msg  string
	}{
		{"port in use", func(c *Config) { c.Standalone, c.MasterPort = false, busyPort }, ErrRendezvous,
			"127.0.0.1:" + strconv.Itoa(busyPort)},
		{"missing program", func(c *Config) { c.Program = "/nonexistent/prog" }, ErrProgram, "no such file"},
		{"not executable", func(c *Config) { c.Program = notExec }, ErrProgram, "not executable"},
		{"does not build", func(c *Config) { c.Program, c.BuildCache = "../testdata/launch/broken", cache }, ErrProgram, "does not build"},
		{"nproc zero", func(c *Config) { c.NProcPerNode = 0 }, ErrUsage, "at least 1"},
		{"node rank too big", func(c *Config) { c.Standalone, c.MinNodes, c.MaxNodes, c.NodeRank = false, 2, 2, 2 }, ErrUsage, "less than --nnodes"},
		{"multi-node needs a token", func(c *Config) {
			c.Standalone, c.MinNodes, c.MaxNodes, c.NodeRank = false, 2, 2, 0
			c.Env = []string{EnvToken + "="}
		}, ErrUsage, EnvToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvToken, "")
			cfg, _, _ := testConfig(2)
			cfg.Log = &syncBuffer{}
			tc.edit(&cfg)
			err := Run(context.Background(), cfg)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestRunRequireGPU(t *testing.T) {
	if n, err := GPUCount(); err == nil && n > 0 {
		t.Skip("this machine has a GPU")
	}
	cfg, _, _ := testConfig(1)
	cfg.RequireGPU = true
	err := Run(context.Background(), cfg)
	require.ErrorIs(t, err, ErrNoGPU)
	assert.Equal(t, ExitNoGPU, ExitCode(err))
	_, err = ResolveNProc("gpu")
	require.ErrorIs(t, err, ErrNoGPU)
}

// goddp's cuda build starts without a GPU (it fails with an error only when
// asked for one), so ddprun starts a cuda-tagged program on any machine.
func TestRunCudaTaggedProgramStartsWithoutGPU(t *testing.T) {
	cfg, out, errb := testConfig(1)
	cfg.Program, cfg.BuildFlags, cfg.Log = "../testdata/launch/cudatag", []string{"-tags=cuda"}, errb
	cfg.BuildCache = t.TempDir()
	require.NoError(t, Run(context.Background(), cfg), errb.String())
	assert.Contains(t, out.String(), "cudatag ran")

	bin := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, exec.Command("go", "build", "-o", bin, "../testdata/launch/cudatag").Run())
	assert.False(t, needsGPU(bin))
	assert.False(t, needsGPU("/bin/sh"), "not a Go binary")
}

func TestRunBuildsPackage(t *testing.T) {
	cfg, out, errb := testConfig(2)
	cfg.Program, cfg.BuildCache = "../testdata/launch/worker", t.TempDir()
	cfg.Log = errb
	require.NoError(t, Run(context.Background(), cfg), errb.String())
	assert.Len(t, reports(out.String(), "start"), 2)
	assert.Contains(t, errb.String(), "building")
}

func TestRunLogDirRedirectsTee(t *testing.T) {
	dir := t.TempDir()
	cfg, out, errb := testConfig(2, "-mode", "fail", "-fail-rank", "1", "-delay", "100ms")
	cfg.LogDir, cfg.RdzvID = dir, "job1"
	cfg.Redirects = StreamSpec{PerRank: map[int]Std{0: StdOut}}
	cfg.Tee = StreamSpec{All: StdErr}
	cfg.LocalRanksFilter = []int{1}
	err := Run(context.Background(), cfg)
	require.ErrorIs(t, err, ErrWorkerFailed)

	base := filepath.Join(dir, "job1", "attempt_0")
	stdout0, err := os.ReadFile(filepath.Join(base, "0", "stdout.log"))
	require.NoError(t, err)
	assert.Contains(t, string(stdout0), `"RANK":"0"`)
	stderr1, err := os.ReadFile(filepath.Join(base, "1", "stderr.log"))
	require.NoError(t, err)
	assert.Contains(t, string(stderr1), "boom")
	// Rank 0's stdout went to its file only, and the filter hides rank 0 anyway.
	assert.NotContains(t, out.String(), `"RANK":"0"`)
	assert.Contains(t, out.String(), `"RANK":"1"`)
	assert.Contains(t, errb.String(), "[rank1]:worker: rank 1: boom")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("condition not met in time")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = strings.Contains
