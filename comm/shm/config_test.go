package shm

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
		"GODDP_SHM_SLOT_BYTES": "64K", "GODDP_SHM_NBUF": "2", "GODDP_SHM_SMALL_MAX": "1K", "GODDP_SHM_CHUNK_BYTES": "4K",
		"GODDP_SHM_CMA_MIN": "16K", "GODDP_SHM_P2P_RING": "4K", "GODDP_SHM_SPIN": "0s", "GODDP_SHM_YIELD": "5ms", "GODDP_SHM_ASYNC": "Lazy",
	}))
	require.NoError(t, err)
	assert.Equal(t, Config{SlotBytes: 64 << 10, NBuf: 2, SmallMax: 1 << 10, ChunkBytes: 4 << 10, CMAMin: 16 << 10,
		P2PRing: 4 << 10, Spin: -1, Yield: 5 * time.Millisecond, Async: "lazy"}, c)
	r := c.resolve(2)
	assert.Zero(t, r.Spin, "GODDP_SHM_SPIN=0s never spins")
	assert.Equal(t, 5*time.Millisecond, r.Yield)

	d := Config{Async: "eager"}.resolve(2)
	assert.Equal(t, Config{SlotBytes: DefaultSlotBytes, NBuf: DefaultNBuf, SmallMax: DefaultSmallMax, ChunkBytes: DefaultChunkBytes,
		CMAMin: DefaultCMAMin, P2PRing: DefaultP2PRing, Spin: shmSpinBudget(2), Yield: shmYieldFor, Async: "eager"}, d)

	for env, val := range map[string]string{
		"GODDP_SHM_SLOT_BYTES": "1K", "GODDP_SHM_NBUF": "1", "GODDP_SHM_CHUNK_BYTES": "a lot", "GODDP_SHM_P2P_RING": "100",
		"GODDP_SHM_SPIN": "2", "GODDP_SHM_YIELD": "-1s", "GODDP_SHM_ASYNC": "sometimes", "GODDP_SHM_CMA_MIN": "4M4",
	} {
		_, err := configFrom(lookupIn(map[string]string{env: val}))
		require.ErrorIs(t, err, backend.ErrBadArgument, env)
		assert.ErrorContains(t, err, env, "the error names the variable")
	}
}

func TestNewRejectsBadEnv(t *testing.T) {
	t.Setenv("GODDP_SHM_NBUF", "four")
	_, err := New(context.Background(), backend.Options{Rank: 0, Size: 1, Store: commtest.NewStore()})
	require.ErrorIs(t, err, backend.ErrBadArgument)
	assert.ErrorContains(t, err, "GODDP_SHM_NBUF")
}
