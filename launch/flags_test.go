package launch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"dashes", []string{"--nproc-per-node", "4", "prog", "-x", "--y"}, func(t *testing.T, c Config) {
			assert.Equal(t, 4, c.NProcPerNode)
			assert.Equal(t, "prog", c.Program)
			assert.Equal(t, []string{"-x", "--y"}, c.Args)
		}},
		{"underscores and equals", []string{"--nproc_per_node=2", "--node_rank=1", "--nnodes=3", "--master_addr=10.0.0.1", "--master_port", "1234", "p"}, func(t *testing.T, c Config) {
			assert.Equal(t, 2, c.NProcPerNode)
			assert.Equal(t, 1, c.NodeRank)
			assert.Equal(t, 3, c.MinNodes)
			assert.Equal(t, 3, c.MaxNodes)
			assert.Equal(t, "10.0.0.1", c.MasterAddr)
			assert.Equal(t, 1234, c.MasterPort)
		}},
		{"single dash", []string{"-nproc-per-node", "2", "-standalone", "p"}, func(t *testing.T, c Config) {
			assert.Equal(t, 2, c.NProcPerNode)
			assert.True(t, c.Standalone)
		}},
		{"elastic", []string{"--nnodes", "1:4", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--rdzv-id", "job", "p"}, func(t *testing.T, c Config) {
			assert.Equal(t, 1, c.MinNodes)
			assert.Equal(t, 4, c.MaxNodes)
			assert.Equal(t, "c10d", c.RdzvBackend)
			assert.Equal(t, -1, c.NodeRank)
			assert.Equal(t, "job", c.RdzvID)
		}},
		{"durations", []string{"--monitor-interval", "0.5", "--rdzv-timeout", "2m", "--rdzv-conf", "last_call_timeout=3,heartbeat_timeout=4s", "p"}, func(t *testing.T, c Config) {
			assert.Equal(t, 500*time.Millisecond, c.MonitorInterval)
			assert.Equal(t, 2*time.Minute, c.RdzvTimeout)
			assert.Equal(t, 3*time.Second, c.LastCall)
			assert.Equal(t, 4*time.Second, c.HeartbeatTimeout)
		}},
		{"streams", []string{"--redirects", "3", "-t", "0:1,2:2", "--local-ranks-filter", "2,0", "--log-dir", "/tmp/x", "p"}, func(t *testing.T, c Config) {
			assert.Equal(t, StdAll, c.Redirects.For(5))
			assert.Equal(t, StdOut, c.Tee.For(0))
			assert.Equal(t, StdNone, c.Tee.For(1))
			assert.Equal(t, StdErr, c.Tee.For(2))
			assert.Equal(t, []int{0, 2}, c.LocalRanksFilter)
			assert.Equal(t, "/tmp/x", c.LogDir)
		}},
		{"double dash ends flags", []string{"--max-restarts", "2", "--", "--weird-prog"}, func(t *testing.T, c Config) {
			assert.Equal(t, 2, c.MaxRestarts)
			assert.Equal(t, "--weird-prog", c.Program)
		}},
		{"cpu", []string{"--nproc-per-node", "cpu", "p"}, func(t *testing.T, c Config) {
			assert.GreaterOrEqual(t, c.NProcPerNode, 1)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseArgs(tc.args)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want error
		msg  string
	}{
		{"unknown flag", []string{"--bogus", "p"}, ErrUsage, "unknown flag --bogus"},
		{"nproc zero", []string{"--nproc-per-node", "0", "p"}, ErrUsage, "at least 1"},
		{"nproc junk", []string{"--nproc-per-node", "many", "p"}, ErrUsage, "auto, cpu or gpu"},
		{"missing program", []string{"--nproc-per-node", "2"}, ErrUsage, "missing PROGRAM"},
		{"missing value", []string{"p", "--x"}, nil, ""},
		{"flag without value", []string{"--node-rank"}, ErrUsage, "needs a value"},
		{"bad nnodes", []string{"--nnodes", "3:1", "p"}, ErrUsage, "MIN <= MAX"},
		{"bad stream", []string{"--tee", "7", "p"}, ErrUsage, "stream spec"},
		{"bad conf", []string{"--rdzv-conf", "nope=1", "p"}, ErrUsage, "unknown key"},
		{"help", []string{"--help"}, ErrHelp, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArgs(tc.args)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"node rank too big", []string{"--nnodes", "2", "--node-rank", "2", "p"}, "--node-rank 2 must be less than --nnodes 2"},
		{"static multi-node needs node rank", []string{"--nnodes", "2", "p"}, "needs --node-rank"},
		{"standalone is one node", []string{"--standalone", "--nnodes", "2", "--node-rank", "0", "p"}, "single node"},
		{"elastic needs store", []string{"--nnodes", "1:2", "p"}, "needs --rdzv-backend store"},
		{"store needs endpoint", []string{"--nnodes", "2", "--rdzv-backend", "store", "p"}, "needs --rdzv-endpoint"},
		{"bad backend", []string{"--rdzv-backend", "etcd", "p"}, "static or store"},
		{"filter out of range", []string{"--nproc-per-node", "2", "--local-ranks-filter", "3", "p"}, "local rank 3"},
		{"negative restarts", []string{"--max-restarts", "-1", "p"}, "--max-restarts"},
		{"rdzv id climbs out of --log-dir", []string{"--rdzv-id", "../../etc", "--log-dir", "/tmp/x", "p"}, `--rdzv-id "../../etc" must be a plain name`},
		{"rdzv id is ..", []string{"--rdzv-id", "..", "p"}, `--rdzv-id ".." must be a plain name`},
		{"rdzv id with a separator", []string{"--rdzv-id", "a/b", "p"}, `--rdzv-id "a/b"`},
		{"rdzv id with a backslash", []string{"--rdzv-id", `a\b`, "p"}, `--rdzv-id "a\\b"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseArgs(tc.args)
			require.NoError(t, err)
			c = c.withDefaults()
			err = c.Validate()
			require.ErrorIs(t, err, ErrUsage)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Equal(t, ExitUsage, ExitCode(err))
		})
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	u := Usage()
	for _, f := range flagTable() {
		assert.Contains(t, u, "--"+f.names[0])
	}
	assert.Contains(t, u, "exit codes")
}
