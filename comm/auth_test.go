package comm

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInitRefusesNoTokenOffLoopback: with a routable master address (or a
// store bound to every interface, or a routable peer address) and no
// token, Init fails on every rank, before it listens or dials anything,
// with a message that names GODDP_TOKEN and says how to set it. Before
// issue 17 it bound the address and let anyone in.
func TestInitRefusesNoTokenOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"routable master, rank 0", Config{Rank: 0, WorldSize: 2, MasterAddr: "192.0.2.1", MasterPort: 29501}, "192.0.2.1:29501"},
		{"routable master, rank 1", Config{Rank: 1, WorldSize: 2, MasterAddr: "192.0.2.1", MasterPort: 29501}, "192.0.2.1:29501"},
		{"store on every interface", Config{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", StoreBind: "0.0.0.0:29501"}, "0.0.0.0:29501"},
		{"tcp:// init method", Config{Rank: 0, WorldSize: 2, InitMethod: "tcp://192.0.2.1:29501"}, "192.0.2.1:29501"},
		{"routable peer address", Config{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", Addr: "192.0.2.7"}, "192.0.2.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = 5 * time.Second
			began := time.Now()
			_, err := Init(context.Background(), tc.cfg)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrBadArgument)
			assert.Contains(t, err.Error(), "GODDP_TOKEN")
			assert.Contains(t, err.Error(), "head -c 32 /dev/urandom")
			assert.Contains(t, err.Error(), "GODDP_INSECURE=1")
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, time.Since(began), time.Second, "refused at once, not after a timeout")
		})
	}
}

func TestInitShortToken(t *testing.T) {
	_, err := Init(context.Background(), Config{WorldSize: 1, Token: "too-short"})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrBadArgument)
	assert.Contains(t, err.Error(), "GODDP_TOKEN is 9 bytes; a job token needs at least 16")
	_, err = ConfigFromEnv()
	_ = err // the environment's own token, if any, is not this test's business
	_, err = configFromLookup(func(k string) (string, bool) {
		v, ok := map[string]string{"GODDP_TOKEN": "short"}[k]
		return v, ok
	})
	assert.ErrorContains(t, err, "at least 16")
}

// TestInitInsecureWarns: GODDP_INSECURE=1 lets a job with no token bind
// every interface, and every rank says so.
func TestInitInsecureWarns(t *testing.T) {
	c, err := configFromLookup(func(k string) (string, bool) {
		v, ok := map[string]string{"GODDP_INSECURE": "1"}[k]
		return v, ok
	})
	require.NoError(t, err)
	require.True(t, c.Insecure)

	port := freePort(t)
	var log logSink
	errs := initWorld(t, 2, func(r int) Config {
		return Config{Backend: "tcp", Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
			StoreBind: "0.0.0.0:" + strconv.Itoa(port), Insecure: true, Timeout: 20 * time.Second, Logf: log.logf}
	}, func(pg ProcessGroup) error {
		x := []float64{1}
		return pg.AllReduce(Float64s(x), Sum).Wait(context.Background())
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for _, r := range []string{"rank 0", "rank 1"} {
		assert.Contains(t, log.text(), "comm: WARNING: "+r+" runs without a job token (GODDP_INSECURE=1)")
	}
}
