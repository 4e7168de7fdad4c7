package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	c, err := configFrom(lookupIn(map[string]string{
		"GODDP_TCP_SMALL_BYTES": "32K", "GODDP_TCP_EXCHANGE_BYTES": "16M", "GODDP_TCP_PIECE_BYTES": "4096",
		"GODDP_TCP_WRITE_BATCH": "128k", "GODDP_TCP_BUFFER": "4M", "GODDP_TCP_CONGESTION": "system", "GODDP_TCP_SPIN_US": "50",
	}))
	require.NoError(t, err)
	assert.Equal(t, Config{SmallBytes: 32 << 10, ExchangeBytes: 16 << 20, PieceBytes: 4096, WriteBatch: 128 << 10,
		SocketBuffer: 4 << 20, Congestion: "system", Spin: 50 * time.Microsecond}, c)

	c, err = configFrom(lookupIn(map[string]string{"GODDP_TCP_SPIN_US": "0"}))
	require.NoError(t, err)
	assert.Zero(t, c.resolve(backend.Options{Size: 1}).Spin, "GODDP_TCP_SPIN_US=0 disables spinning")

	r := Config{}.resolve(backend.Options{Size: 1})
	assert.Equal(t, Config{SmallBytes: DefaultSmallBytes, ExchangeBytes: DefaultExchangeBytes, PieceBytes: DefaultPieceBytes,
		WriteBatch: DefaultWriteBatch, SocketBuffer: DefaultSocketBuffer, Congestion: "auto", Spin: defaultSpin}, r)

	for env, val := range map[string]string{
		"GODDP_TCP_BUFFER": "4 megs", "GODDP_TCP_PIECE_BYTES": "16", "GODDP_TCP_SPIN_US": "2ms",
		"GODDP_TCP_CONGESTION": "re no", "GODDP_TCP_SMALL_BYTES": "2G",
	} {
		_, err := configFrom(lookupIn(map[string]string{env: val}))
		require.ErrorIs(t, err, backend.ErrBadArgument, env)
		assert.ErrorContains(t, err, env, "the error names the variable")
	}
}

// A bad variable fails group creation, where it used to be ignored.
func TestNewRejectsBadEnv(t *testing.T) {
	t.Setenv("GODDP_TCP_BUFFER", "lots")
	_, err := New(context.Background(), backend.Options{Rank: 0, Size: 1, Store: commtest.NewStore()})
	require.ErrorIs(t, err, backend.ErrBadArgument)
	assert.ErrorContains(t, err, "GODDP_TCP_BUFFER")
}
