package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// shuffleRank is one rank's list in testdata/data/distributed_sampler_shuffle.json:
// either the whole list or, for long ones, its length, the SHA-256 of its
// int64 little-endian bytes and its first entries.
type shuffleRank struct {
	full []int
	N    int    `json:"n"`
	SHA  string `json:"sha256"`
	Head []int  `json:"head"`
}

func (r *shuffleRank) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &r.full)
	}
	type plain shuffleRank
	return json.Unmarshal(b, (*plain)(r))
}

func (r *shuffleRank) check(t *testing.T, got []int, msg string) {
	t.Helper()
	if r.full != nil {
		require.Equal(t, r.full, got, msg)
		return
	}
	require.Len(t, got, r.N, msg)
	require.Equal(t, r.Head, got[:len(r.Head)], msg+": first indices")
	buf := make([]byte, 8*len(got))
	for i, v := range got {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
	}
	sum := sha256.Sum256(buf)
	require.Equal(t, r.SHA, hex.EncodeToString(sum[:]), msg+": SHA-256 of the whole list")
}

// TestDistributedSamplerShuffleMatchesTorch is issue 19's bar: with shuffle
// on, for N in {10, 1000, 60000}, seeds {0, 7}, epochs 0-2 and 2 or 3
// replicas, every rank's list equals torch 1.13's DistributedSampler's
// (fixtures from scripts/gen_fixtures_rng.py).
func TestDistributedSamplerShuffleMatchesTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "data", "distributed_sampler_shuffle.json"))
	require.NoError(t, err, "fixtures come from /usr/bin/python3 scripts/gen_fixtures_rng.py")
	var fix struct {
		Cases []struct {
			N        int           `json:"n"`
			Seed     uint64        `json:"seed"`
			Epoch    int           `json:"epoch"`
			Replicas int           `json:"num_replicas"`
			Ranks    []shuffleRank `json:"ranks"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &fix))
	require.Len(t, fix.Cases, 3*2*3*2)
	for _, c := range fix.Cases {
		require.Len(t, c.Ranks, c.Replicas)
		for rank := range c.Replicas {
			s, err := NewDistributedSampler(sized(c.N), SamplerReplicas(c.Replicas), SamplerRank(rank), SamplerSeed(c.Seed))
			require.NoError(t, err)
			s.SetEpoch(c.Epoch)
			c.Ranks[rank].check(t, s.Indices(), fmt.Sprintf("N=%d seed=%d epoch=%d rank %d/%d", c.N, c.Seed, c.Epoch, rank, c.Replicas))
		}
	}
}
