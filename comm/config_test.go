package comm

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Config
		err  string
	}{
		{
			name: "torchrun",
			env: map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
				"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234", "GODDP_TIMEOUT": "90", "GODDP_TOKEN": "0123456789abcdef",
				"TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_RESTART_COUNT": "2"},
			want: Config{Rank: 3, WorldSize: 8, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "10.0.0.1",
				MasterPort: 1234, Timeout: 90 * time.Second, Token: "0123456789abcdef", StorePrefix: "goddp/job7/2", RunID: "job7"},
		},
		{
			name: "pytorchjob",
			env:  map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"},
			want: Config{Rank: 1, WorldSize: 2, MasterAddr: "job-master-0", MasterPort: 23456},
		},
		{
			name: "openmpi",
			env: map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
				"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "h1"},
			want: Config{Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2, MasterAddr: "h1"},
		},
		{
			name: "slurm",
			env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
				"SLURM_NODELIST": "gpu[07-10],cpu1", "SLURM_JOB_ID": "42", "GODDP_TIMEOUT": "2m",
				"GODDP_DEBUG_COLLECTIVES": "1", "GODDP_STALL_THRESHOLD": "off", "GODDP_BACKEND": "tcp"},
			want: Config{Rank: 5, WorldSize: 8, MasterAddr: "gpu07", Timeout: 2 * time.Minute, DebugCollectives: true,
				StallThreshold: -1, Backend: "tcp", StorePrefix: "goddp/42/", RunID: "42",
				LocalRank: 1, localRankFrom: "SLURM_LOCALID"},
		},
		{
			name: "torchrun wins over slurm",
			env:  map[string]string{"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "8"},
			want: Config{Rank: 0, WorldSize: 2},
		},
		{name: "none", env: map[string]string{}, want: Config{Rank: 0, WorldSize: 1}},
		{name: "bad rank", env: map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, err: `RANK="x" is not an integer`},
		{name: "rank out of range", env: map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, err: "RANK=2 is outside [0, 2) given by WORLD_SIZE=2"},
		{name: "half a launcher pair", env: map[string]string{"OMPI_COMM_WORLD_RANK": "1"}, err: "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"},
		{name: "slurm uneven nodes", env: map[string]string{"SLURM_PROCID": "6", "SLURM_NTASKS": "7", "SLURM_LOCALID": "0",
			"SLURM_NODEID": "3", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODELIST": "n[1-4]"},
			want: Config{Rank: 6, WorldSize: 7, LocalRank: 0, LocalWorldSize: 1, MasterAddr: "n1"}},
		{name: "bad timeout", env: map[string]string{"GODDP_TIMEOUT": "soon"}, err: "GODDP_TIMEOUT"},
		// Issue 24: ParseFloat takes these, and the timeout came out as
		// "negative timeout -2562047h47m16.854775808s".
		{name: "infinite timeout", env: map[string]string{"GODDP_TIMEOUT": "inf"}, err: `GODDP_TIMEOUT="inf": want a number of seconds or a Go duration`},
		{name: "NaN timeout", env: map[string]string{"GODDP_TIMEOUT": "NaN"}, err: `GODDP_TIMEOUT="NaN": want a number of seconds or a Go duration`},
		{name: "huge timeout", env: map[string]string{"GODDP_TIMEOUT": "1e300"}, err: `GODDP_TIMEOUT="1e300": 1e300 seconds is longer than the most a timeout can be (2562047h47m16.854775807s)`},
		{name: "huge Go duration", env: map[string]string{"GODDP_TIMEOUT": "9999999h"}, err: `GODDP_TIMEOUT="9999999h"`},
		{name: "bad init method", env: map[string]string{"GODDP_INIT_METHOD": "udp://x"}, err: "init method"},
		{name: "bad node list", env: map[string]string{"SLURM_NODELIST": "n[3-1]"}, err: "bad range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := configFromLookup(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrBadArgument)
				assert.Contains(t, err.Error(), tc.err)
				assert.NotContains(t, err.Error(), "negative")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestExpandNodeList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node1", []string{"node1"}},
		{"node[01-03]", []string{"node01", "node02", "node03"}},
		{"a[1,3-4],b", []string{"a1", "a3", "a4", "b"}},
		{"r[1-2]-n[8-9]", []string{"r1-n8", "r1-n9", "r2-n8", "r2-n9"}},
		{"x[098-100]", []string{"x098", "x099", "x100"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ExpandNodeList(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"n[1-", "n]1", "n[a-b]", "n]x[1]"} {
		_, err := ExpandNodeList(bad)
		assert.ErrorIs(t, err, ErrBadArgument, bad)
	}
}

// TestNodeListHuge is issue 24's item 8: SLURM_NODELIST='n[0-3000]-[0-3000]'
// (9 million hosts) ran ConfigFromEnv out of memory expanding it. Only the
// first host is used, so only it is made; ExpandNodeList refuses a list
// past MaxNodeListHosts before expanding anything.
func TestNodeListHuge(t *testing.T) {
	const huge = "n[0-3000]-[0-3000]"
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "1", "SLURM_NODELIST": huge}
	c, err := configFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, "n0-0", c.MasterAddr)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated reading the list")

	for _, list := range []string{huge, "a[0-65535],b", "n[0-99999999]", "x[0-9][0-9][0-9][0-9][0-9]"} {
		_, err = ExpandNodeList(list)
		require.ErrorIs(t, err, ErrBadArgument, list)
		assert.Contains(t, err.Error(), "more than 65536 hosts", list)
	}
	hosts, err := ExpandNodeList("a[0-65534],b")
	require.NoError(t, err)
	assert.Len(t, hosts, MaxNodeListHosts)
	assert.Equal(t, "b", hosts[len(hosts)-1])
	host, err := firstNodeListHost("gpu[007-010,3]-x[2-3]y,cpu1")
	require.NoError(t, err)
	assert.Equal(t, "gpu007-x2y", host)
}

// initWorld runs Init on world goroutine ranks with cfgs from mk.
func initWorld(t *testing.T, world int, mk func(r int) Config, fn func(pg ProcessGroup) error) []error {
	t.Helper()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pg, err := Init(ctx, mk(r))
			if err != nil {
				errs[r] = err
				return
			}
			defer pg.Close()
			errs[r] = fn(pg)
		}()
	}
	wg.Wait()
	return errs
}

func TestInit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rdzv")
	tests := []struct {
		name    string
		cfg     func(port int) Config
		backend func() string
	}{
		{"env tcp", func(port int) Config {
			return Config{Backend: "tcp", MasterAddr: "127.0.0.1", MasterPort: port, Token: "test-token-0123456789"}
		}, func() string { return "tcp" }},
		{"tcp init method", func(port int) Config {
			return Config{Backend: "tcp", InitMethod: fmt.Sprintf("tcp://127.0.0.1:%d", port)}
		}, func() string { return "tcp" }},
		{"file init method", func(int) Config {
			return Config{Backend: "tcp", InitMethod: "file://" + file}
		}, func() string { return "tcp" }},
		{"auto", func(port int) Config {
			return Config{MasterAddr: "127.0.0.1", MasterPort: port}
		}, func() string {
			if _, err := backend.Lookup("shm"); err == nil {
				return "shm" // every rank is on this host
			}
			return "tcp"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			const world = 3
			errs := initWorld(t, world, func(r int) Config {
				c := tc.cfg(port)
				c.Rank, c.WorldSize, c.Timeout = r, world, 20*time.Second
				return c
			}, func(pg ProcessGroup) error {
				if pg.Backend() != tc.backend() {
					return fmt.Errorf("backend %q, want %q", pg.Backend(), tc.backend())
				}
				x := []float64{float64(pg.Rank())}
				if err := pg.AllReduce(Float64s(x), Sum).Wait(context.Background()); err != nil {
					return err
				}
				if x[0] != 3 {
					return fmt.Errorf("sum %v, want 3", x[0])
				}
				if _, ok := pg.(interface{ Unwrap() ProcessGroup }); !ok {
					return fmt.Errorf("Init's group does not unwrap")
				}
				return pg.Barrier().Wait(context.Background())
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

func TestInitTokenMismatch(t *testing.T) {
	port := freePort(t)
	var log logSink
	errs := initWorld(t, 2, func(r int) Config {
		return Config{Backend: "tcp", Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
			Token: fmt.Sprintf("token-%d-0123456789", r), Timeout: 3 * time.Second, Logf: log.logf}
	}, func(pg ProcessGroup) error { return nil })
	// Rank 1 is refused by the store; rank 0 then times out waiting for it.
	require.Error(t, errs[1])
	assert.ErrorIs(t, errs[1], ErrAuth)
	require.Error(t, errs[0])
	assert.True(t, errors.Is(errs[0], ErrTimeout), "%v", errs[0])
	assert.Contains(t, errs[0].Error(), "waiting for rank 1 to join")
	assert.Contains(t, log.text(), "wrong job token")
	assert.NotContains(t, log.text(), "token-")
}

func TestInitPortInUse(t *testing.T) {
	srv, err := ListenStore(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Addr())
	port, _ := strconv.Atoi(portStr)
	_, err = Init(context.Background(), Config{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("127.0.0.1:%d", port))
	assert.Contains(t, err.Error(), fmt.Sprintf("is another job using port %d?", port))
}

// TestInitWorldOfOneTakesAFreePort: two programs run without a launcher
// (world size 1, no MASTER_PORT) on one host at once both start; neither
// holds torch's default port.
func TestInitWorldOfOneTakesAFreePort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pgs []ProcessGroup
	for range 2 {
		pg, err := Init(ctx, Config{Backend: "tcp", Rank: 0, WorldSize: 1})
		require.NoError(t, err)
		pgs = append(pgs, pg)
	}
	for _, pg := range pgs {
		require.Equal(t, 1, pg.Size())
		require.NoError(t, pg.Close())
	}
	_, target, err := Config{WorldSize: 2}.initTarget()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:29500", target, "a world of two still meets at torch's default port")
}
