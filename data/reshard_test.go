package data

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// consume takes pos indices from each rank of a world (lockstep) and
// returns them with rank 0's state after.
func consume(t *testing.T, samplers []*DistributedSampler, pos int) ([]int, SamplerState) {
	t.Helper()
	var seen []int
	for _, s := range samplers {
		idx := s.Indices()[s.Position():]
		take := min(pos, len(idx))
		seen = append(seen, idx[:take]...)
		s.SetPosition(s.Position() + take)
	}
	return seen, samplers[0].State()
}

func world(t *testing.T, n, replicas int, opts ...SamplerOption) []*DistributedSampler {
	var ss []*DistributedSampler
	for r := range replicas {
		ss = append(ss, newDS(t, n, append(opts, SamplerReplicas(replicas), SamplerRank(r))...))
	}
	return ss
}

// requireOnce checks that seen holds every index of 0..n-1 exactly once.
func requireOnce(t *testing.T, n int, seen []int) {
	t.Helper()
	count := make([]int, n)
	for _, i := range seen {
		require.True(t, i >= 0 && i < n, "index %d", i)
		count[i]++
	}
	var missing, repeated []int
	for i, c := range count {
		if c == 0 {
			missing = append(missing, i)
		}
		if c > 1 {
			repeated = append(repeated, i)
		}
	}
	require.Empty(t, missing, "missing")
	require.Empty(t, repeated, "repeated")
}

// An epoch saved at world 3 mid-epoch and resumed at world 2 (and the
// other way, and twice over) sees each of its samples exactly once.
func TestReshardMidEpoch(t *testing.T) {
	for _, tc := range []struct {
		n       int
		worlds  []int // the world sizes the epoch runs at, in turn
		pos     []int // per-rank indices consumed at each but the last
		shuffle bool
	}{
		{103, []int{3, 2}, []int{11}, true},
		{103, []int{2, 3}, []int{40}, true},
		{100, []int{3, 2}, []int{33}, false},
		{1000, []int{3, 2, 4}, []int{100, 120}, true},
		{57, []int{4, 1}, []int{1}, true},
		{10, []int{3, 2}, []int{4}, true}, // saved in the padded tail: nothing left
	} {
		t.Run(fmt.Sprintf("n%d/%v/%v", tc.n, tc.worlds, tc.pos), func(t *testing.T) {
			const epoch = 5
			opts := []SamplerOption{SamplerSeed(7), SamplerShuffle(tc.shuffle)}
			ss := world(t, tc.n, tc.worlds[0], opts...)
			for _, s := range ss {
				s.SetEpoch(epoch)
			}
			var seen []int
			for k, next := range tc.worlds[1:] {
				got, st := consume(t, ss, tc.pos[k])
				seen = append(seen, got...)
				// The state goes through JSON, as a checkpoint stores it.
				b, err := json.Marshal(st)
				require.NoError(t, err)
				var back SamplerState
				require.NoError(t, json.Unmarshal(b, &back))
				ss = world(t, tc.n, next, opts...)
				for _, s := range ss {
					require.NoError(t, s.LoadStateElastic(back))
					s.SetEpoch(epoch) // keeps the resumed position
				}
			}
			lens := map[int]bool{}
			for _, s := range ss {
				lens[s.Len()] = true
				require.Len(t, s.Indices(), s.Len())
			}
			require.LessOrEqual(t, len(lens), 2, "the ranks' shares differ by at most one")
			rest, _ := consume(t, ss, tc.n)
			seen = append(seen, rest...)
			if tc.n == 10 {
				// 4 of 4 per rank at world 3 consumed the epoch (and 2 padded repeats).
				require.Empty(t, rest)
				return
			}
			requireOnce(t, tc.n, seen)
			// The next epoch is an ordinary one at the new world size.
			ss[0].SetEpoch(epoch + 1)
			require.Equal(t, 0, ss[0].State().Base)
			require.Equal(t, ceilDiv(tc.n, len(ss)), ss[0].Len())
		})
	}
}

// A resumed epoch saved again at the same world size loads with LoadState
// and continues where it was.
func TestReshardSavedAgainSameWorld(t *testing.T) {
	ss := world(t, 50, 3, SamplerSeed(1))
	_, st := consume(t, ss, 5)
	two := world(t, 50, 2, SamplerSeed(1))
	for _, s := range two {
		require.NoError(t, s.LoadStateElastic(st))
	}
	_, st2 := consume(t, two, 4)
	require.Equal(t, 15, st2.Base)
	again := newDS(t, 50, SamplerSeed(1), SamplerReplicas(2), SamplerRank(1))
	require.NoError(t, again.LoadState(st2))
	require.Equal(t, two[1].Indices(), again.Indices())
	require.Equal(t, 4, again.Position())
}

// Only the replica count may differ.
func TestReshardRefusesOtherPartitions(t *testing.T) {
	st := newDS(t, 100, SamplerSeed(9), SamplerReplicas(3), SamplerRank(0)).State()
	st.Position = 10
	for name, s := range map[string]*DistributedSampler{
		"seed":   newDS(t, 100, SamplerSeed(8), SamplerReplicas(2), SamplerRank(0)),
		"length": newDS(t, 99, SamplerSeed(9), SamplerReplicas(2), SamplerRank(0)),
		"eval":   newDS(t, 100, SamplerSeed(9), SamplerReplicas(2), SamplerRank(0), SamplerEval()),
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, s.LoadStateElastic(st), ErrState)
			require.Equal(t, 0, s.Position())
		})
	}
	// LoadState itself still refuses another world size.
	require.ErrorIs(t, newDS(t, 100, SamplerSeed(9), SamplerReplicas(2), SamplerRank(0)).LoadState(st), ErrState)
}

// With DropLast the rest is cut to a multiple of the replicas: equal
// shares, nothing seen twice.
func TestReshardDropLast(t *testing.T) {
	ss := world(t, 101, 3, SamplerSeed(3), SamplerDropLast(true))
	seen, st := consume(t, ss, 10)
	two := world(t, 101, 2, SamplerSeed(3), SamplerDropLast(true))
	for _, s := range two {
		require.NoError(t, s.LoadStateElastic(st))
	}
	require.Equal(t, two[0].Len(), two[1].Len())
	rest, _ := consume(t, two, 101)
	seen = append(seen, rest...)
	require.Len(t, seen, 30+70)
	requireUnique(t, seen)
}

func requireUnique(t *testing.T, seen []int) {
	t.Helper()
	m := map[int]bool{}
	for _, i := range seen {
		require.False(t, m[i], "index %d repeated", i)
		m[i] = true
	}
}
