package comm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rankRun is one Init in a goroutine.
type rankRun struct {
	name string
	done chan struct{}
	pg   ProcessGroup
	err  error
	took time.Duration
}

// goInit runs Init(cfg) in a goroutine; fn, if set, runs on the group.
func goInit(t *testing.T, name string, cfg Config, fn func(ProcessGroup) error) *rankRun {
	t.Helper()
	r := &rankRun{name: name, done: make(chan struct{})}
	began := time.Now()
	go func() {
		defer close(r.done)
		r.pg, r.err = Init(context.Background(), cfg)
		if r.err == nil && fn != nil {
			r.err = fn(r.pg)
		}
		r.took = time.Since(began)
	}()
	t.Cleanup(func() {
		<-r.done
		if r.pg != nil {
			r.pg.Close()
		}
	})
	return r
}

func (r *rankRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: Init still running after 60s", r.name)
		return nil
	}
}

func allReduceRank(pg ProcessGroup) error {
	x := []float64{float64(pg.Rank() + 1)}
	if err := pg.AllReduce(Float64s(x), Sum).Wait(context.Background()); err != nil {
		return err
	}
	if want := float64(pg.Size() * (pg.Size() + 1) / 2); x[0] != want {
		return fmt.Errorf("rank %d: sum %v, want %v", pg.Rank(), x[0], want)
	}
	return nil
}

// envConfig is a rank's Config as ConfigFromEnv reads it from env.
func envConfig(t *testing.T, env map[string]string) Config {
	t.Helper()
	c, err := configFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	return c
}

// TestInitDoubleClaim: job A's ranks 0 and 1 and a stranger started as
// rank 1 (another job of the same program on the same default port) meet
// in A's store while A's rank 2 has not come yet. Before issue 24 the
// second rank 1 silently replaced the first, and everyone waited the whole
// timeout; now the second claim of rank 1 is refused naming the holder,
// and the rendezvous fails at once on every rank, naming rank 1.
func TestInitDoubleClaim(t *testing.T) {
	port := freePort(t)
	cfg := func(rank int) Config {
		return Config{Backend: "tcp", Rank: rank, WorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: 15 * time.Second}
	}
	a0 := goInit(t, "A rank 0", cfg(0), nil)
	a1 := goInit(t, "A rank 1", cfg(1), nil)
	time.Sleep(200 * time.Millisecond)
	b1 := goInit(t, "stranger rank 1", cfg(1), nil)
	var refused int
	for _, r := range []*rankRun{a0, a1, b1} {
		err := r.wait(t)
		t.Logf("%s after %v: %v", r.name, r.took.Round(time.Millisecond), err)
		require.Error(t, err, r.name)
		assert.ErrorIs(t, err, ErrBadArgument, r.name)
		assert.Less(t, r.took, 5*time.Second, "%s fails at once, not at the timeout", r.name)
		if strings.Contains(err.Error(), "is already taken by pid") {
			refused++
			assert.Contains(t, err.Error(), fmt.Sprintf("rank 1 of the job at 127.0.0.1:%d is already taken by pid %d", port, os.Getpid()))
		} else {
			assert.Contains(t, err.Error(), "rank 1 was claimed twice: first by pid", r.name)
		}
	}
	assert.Equal(t, 1, refused, "exactly one of the two rank 1s is refused as the second claimant")
}

// TestInitLateStranger: a process that claims rank 1 after the job has
// formed is refused naming the holder, and the rank hosting the store
// reports it; the job goes on with the ranks it formed with.
func TestInitLateStranger(t *testing.T) {
	port := freePort(t)
	var log logSink
	cfg := func(rank int) Config {
		return Config{Backend: "tcp", Rank: rank, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
			Timeout: 15 * time.Second, Logf: log.logf}
	}
	ready := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	job := make([]*rankRun, 2)
	for r := range job {
		job[r] = goInit(t, fmt.Sprintf("rank %d", r), cfg(r), func(pg ProcessGroup) error {
			if err := allReduceRank(pg); err != nil {
				return err
			}
			if pg.Rank() == 0 {
				close(ready)
			}
			<-release
			return allReduceRank(pg)
		})
	}
	t.Cleanup(letGo) // runs before goInit's clean-ups, which wait for the ranks
	<-ready
	stranger := goInit(t, "stranger", cfg(1), nil)
	err := stranger.wait(t)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrBadArgument)
	assert.Contains(t, err.Error(), "rank 1 of the job at 127.0.0.1:"+strconv.Itoa(port)+" is already taken by pid")
	require.Eventually(t, func() bool { return strings.Contains(log.text(), "rank 1 was claimed twice") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, log.text(), "comm: rank 0: WARNING: rank 1 was claimed twice: first by pid")
	letGo()
	for _, r := range job {
		require.NoError(t, r.wait(t), "the job goes on")
	}
}

// TestInitRunIDMismatch: a rank whose run id differs from the job's is
// refused at once, naming both ids, though with its own run id its keys
// live under another prefix. The job's rank 0, left waiting, names it in
// its timeout; a real rank 1 that comes later joins as if nothing happened.
func TestInitRunIDMismatch(t *testing.T) {
	port := freePort(t)
	cfg := func(run string, rank int, timeout time.Duration) Config {
		return envConfig(t, map[string]string{"RANK": strconv.Itoa(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
			"MASTER_PORT": strconv.Itoa(port), "GODDP_BACKEND": "tcp", "TORCHELASTIC_RUN_ID": run,
			"TORCHELASTIC_RESTART_COUNT": "0", "GODDP_TIMEOUT": timeout.String()})
	}
	t.Run("refused, then the real rank joins", func(t *testing.T) {
		a0 := goInit(t, "A rank 0", cfg("jobA", 0, 20*time.Second), allReduceRank)
		b1 := goInit(t, "B rank 1", cfg("jobB", 1, 20*time.Second), nil)
		err := b1.wait(t)
		require.Error(t, err)
		t.Logf("stranger after %v: %v", b1.took.Round(time.Millisecond), err)
		assert.ErrorIs(t, err, ErrBadArgument)
		assert.Less(t, b1.took, 5*time.Second)
		assert.Contains(t, err.Error(), `this rank's run id is "jobB" but the job at 127.0.0.1:`+strconv.Itoa(port)+` is run "jobA"`)
		a1 := goInit(t, "A rank 1", cfg("jobA", 1, 20*time.Second), allReduceRank)
		require.NoError(t, a0.wait(t))
		require.NoError(t, a1.wait(t))
	})
	t.Run("named in the job's timeout", func(t *testing.T) {
		port = freePort(t)
		a0 := goInit(t, "A rank 0", cfg("jobA", 0, 2*time.Second), nil)
		b1 := goInit(t, "B rank 1", cfg("jobB", 1, 20*time.Second), nil)
		require.Error(t, b1.wait(t))
		err := a0.wait(t)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Contains(t, err.Error(), "waiting for rank 1 to join")
		assert.Contains(t, err.Error(), `of run "jobB", was refused`)
	})
}

// TestInitSettingsMismatch: ranks started with different WORLD_SIZE or
// GODDP_BACKEND fail at rendezvous, every one of them, naming both values.
// Before issue 24 they waited the whole timeout "waiting for rank 2 to join".
func TestInitSettingsMismatch(t *testing.T) {
	tests := []struct {
		name   string
		mk     func(rank int, c Config) Config
		values []string
	}{
		{"rank 1 world size", func(rank int, c Config) Config {
			if rank == 1 {
				c.WorldSize = 3
			}
			return c
		}, []string{"WORLD_SIZE=3", "WORLD_SIZE=2"}},
		{"rank 0 world size", func(rank int, c Config) Config {
			if rank == 0 {
				c.WorldSize = 3
			}
			return c
		}, []string{"WORLD_SIZE=2", "WORLD_SIZE=3"}},
		{"backend", func(rank int, c Config) Config {
			if rank == 1 {
				c.Backend = "shm"
			}
			return c
		}, []string{"GODDP_BACKEND=shm", "GODDP_BACKEND=tcp"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			var ranks []*rankRun
			for r := range 2 {
				c := Config{Backend: "tcp", Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: 15 * time.Second}
				ranks = append(ranks, goInit(t, fmt.Sprintf("rank %d", r), tc.mk(r, c), nil))
			}
			for _, r := range ranks {
				err := r.wait(t)
				t.Logf("%s after %v: %v", r.name, r.took.Round(time.Millisecond), err)
				require.Error(t, err, r.name)
				assert.ErrorIs(t, err, ErrBadArgument, r.name)
				assert.Less(t, r.took, 5*time.Second, "%s fails at once, not at the timeout", r.name)
				for _, v := range tc.values {
					assert.Contains(t, err.Error(), v, r.name)
				}
			}
		})
	}
}

// TestInitReusedFileStore: a second run on the file of a first one. Before
// issue 24 its rank 1 read the first run's address of rank 0 and dialled it
// until the timeout. Now every run scopes its keys by a generation that
// rank 0 publishes, so a run after a clean one just works; a file whose
// run is still there (here: never closed) is refused at once, naming it.
func TestInitReusedFileStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "store")
	cfg := func(rank int) Config {
		return Config{Backend: "tcp", InitMethod: "file://" + file, Rank: rank, WorldSize: 2, Timeout: 10 * time.Second}
	}
	run := func() []*rankRun {
		// Rank 1 first, so it reads the store before rank 0 has written
		// anything of this run.
		r1 := goInit(t, "rank 1", cfg(1), allReduceRank)
		time.Sleep(300 * time.Millisecond)
		r0 := goInit(t, "rank 0", cfg(0), allReduceRank)
		return []*rankRun{r0, r1}
	}
	for i := range 3 {
		for _, r := range run() {
			require.NoError(t, r.wait(t), "run %d, %s", i, r.name)
			require.NoError(t, r.pg.Close())
			r.pg = nil
		}
	}

	// A run that never closes its groups leaves its record: the next run
	// is refused, not left to hang.
	for _, r := range run() {
		require.NoError(t, r.wait(t))
	}
	for _, r := range run() {
		err := r.wait(t)
		t.Logf("%s after %v: %v", r.name, r.took.Round(time.Millisecond), err)
		require.Error(t, err, r.name)
		assert.ErrorIs(t, err, ErrBadArgument)
		assert.Less(t, r.took, 5*time.Second)
		assert.Contains(t, err.Error(), "file://"+file)
	}
}

// TestInitLocalRankWithoutLocalWorldSize: LOCAL_RANK with no
// LOCAL_WORLD_SIZE was ignored. Now Init derives the placement from the
// hosts and fails, on every rank, when a LOCAL_RANK disagrees with it.
func TestInitLocalRankWithoutLocalWorldSize(t *testing.T) {
	for _, tc := range []struct {
		name       string
		localRanks [2]int
		err        string
	}{
		{"matches", [2]int{0, 1}, ""},
		{"swapped", [2]int{1, 0}, "was started with LOCAL_RANK="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			var ranks []*rankRun
			for r := range 2 {
				c := envConfig(t, map[string]string{"RANK": strconv.Itoa(r), "WORLD_SIZE": "2", "LOCAL_RANK": strconv.Itoa(tc.localRanks[r]),
					"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port), "GODDP_BACKEND": "tcp", "GODDP_TIMEOUT": "15s"})
				ranks = append(ranks, goInit(t, fmt.Sprintf("rank %d", r), c, allReduceRank))
			}
			for rank, r := range ranks {
				err := r.wait(t)
				if tc.err == "" {
					require.NoError(t, err, r.name)
					continue
				}
				require.Error(t, err, r.name)
				assert.ErrorIs(t, err, ErrBadArgument)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, err.Error(), fmt.Sprintf("LOCAL_RANK=%d but is local rank %d of the 2 ranks on its host", tc.localRanks[rank], rank))
				assert.Contains(t, err.Error(), "LOCAL_WORLD_SIZE")
			}
		})
	}
}

// TestInitListenErrorHint: only a port in use gets "is another job using
// port"; before issue 24 every store listen error did, even a bad
// GODDP_STORE_* setting.
func TestInitListenErrorHint(t *testing.T) {
	t.Setenv("GODDP_STORE_MAX_HANDSHAKES", "many")
	_, err := Init(context.Background(), Config{Rank: 0, WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: freePort(t), Timeout: 5 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `GODDP_STORE_MAX_HANDSHAKES="many"`)
	assert.NotContains(t, err.Error(), "is another job using port")
	assert.True(t, errors.Is(err, ErrBadArgument), "%v", err)
}
