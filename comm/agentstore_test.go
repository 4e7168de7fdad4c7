package comm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/store"
	"github.com/goddp/goddp/comm/store/c10d"
)

// TestOpenAgentStore: Init joins torchrun's agent store only where torch's
// env:// rendezvous would (TORCHELASTIC_USE_AGENT_STORE exactly "True"),
// never under a launcher hosting goddp's store, and a store that is not
// torch's fails at once, naming it. The joined case runs in e2e, under
// Debian's torchrun (TestTorchrunLinear/static).
func TestOpenAgentStore(t *testing.T) {
	goddp, err := store.Listen(context.Background(), "127.0.0.1:0", store.WithLogger(func(string, ...any) {}))
	require.NoError(t, err)
	t.Cleanup(func() { goddp.Close() })
	cfg := Config{Rank: 1, WorldSize: 2, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name            string
		use, restart    string
		scheme          string
		hosted          bool
		tried           bool
		err             error
		wantErrContains string
	}{
		{name: "not torchrun", scheme: "env"},
		{name: "torch compares with str(True)", use: "true", restart: "0", scheme: "env"},
		{name: "ddprun hosts goddp's store", use: "True", restart: "0", scheme: "env", hosted: true},
		{name: "file store", use: "True", restart: "0", scheme: "file"},
		{name: "no restart count", use: "True", scheme: "env", tried: true, err: ErrBadArgument,
			wantErrContains: `TORCHELASTIC_RESTART_COUNT="" is not a restart count`},
		{name: "not a torch store", use: "True", restart: "2", scheme: "env", tried: true, err: c10d.ErrProtocol,
			wantErrContains: "torchrun's agent store at " + goddp.Addr()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envUseAgentStore, tc.use)
			t.Setenv(envRestartCount, tc.restart)
			cfg := cfg
			cfg.StoreHosted = tc.hosted
			start := time.Now()
			s, tried, err := openAgentStore(context.Background(), cfg, tc.scheme, goddp.Addr())
			require.Equal(t, tc.tried, tried)
			require.Nil(t, s)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, tc.wantErrContains)
			require.Less(t, time.Since(start), 3*time.Second)
		})
	}
}
