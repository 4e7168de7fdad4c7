package data

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sized int

func (s sized) Len() int { return int(s) }

type torchFixture struct {
	TorchVersion string `json:"torch_version"`
	Cases        []struct {
		N           int     `json:"n"`
		NumReplicas int     `json:"num_replicas"`
		DropLast    bool    `json:"drop_last"`
		Len         []int   `json:"len"`
		Indices     [][]int `json:"indices"`
	} `json:"cases"`
}

func loadTorchFixture(t *testing.T) torchFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "data", "distributed_sampler.json"))
	require.NoError(t, err, "regenerate with /usr/bin/python3 scripts/gen_fixtures_sampler.py")
	var f torchFixture
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Cases)
	return f
}

func newDS(t *testing.T, n int, opts ...SamplerOption) *DistributedSampler {
	t.Helper()
	s, err := NewDistributedSampler(sized(n), opts...)
	require.NoError(t, err)
	return s
}

// TestDistributedSamplerMatchesTorch compares every rank's list with
// PyTorch's DistributedSampler(shuffle=False), from committed fixtures.
func TestDistributedSamplerMatchesTorch(t *testing.T) {
	f := loadTorchFixture(t)
	for _, c := range f.Cases {
		name := "N" + itoa(c.N) + "_R" + itoa(c.NumReplicas)
		if c.DropLast {
			name += "_droplast"
		}
		t.Run(name, func(t *testing.T) {
			for rank := range c.NumReplicas {
				s := newDS(t, c.N, SamplerReplicas(c.NumReplicas), SamplerRank(rank),
					SamplerShuffle(false), SamplerDropLast(c.DropLast), SamplerSeed(7))
				s.SetEpoch(3)
				assert.Equal(t, c.Len[rank], s.Len(), "len(sampler) rank %d", rank)
				got := s.Indices()
				if len(got) == 0 {
					got = []int{}
				}
				assert.Equal(t, c.Indices[rank], got, "rank %d", rank)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestDistributedSamplerShuffleStructure checks that with shuffle on, the
// lists have torch's lengths, that the padding repeats the permutation's head
// (so every sample is seen once, plus exactly the padding), and that the split
// is by stride.
func TestDistributedSamplerShuffleStructure(t *testing.T) {
	f := loadTorchFixture(t)
	for _, c := range f.Cases {
		if c.N == 0 {
			continue
		}
		t.Run(itoa(c.N)+"/"+itoa(c.NumReplicas), func(t *testing.T) {
			const seed, epoch = 42, 5
			perm := Permutation(c.N, seed+epoch)
			var union []int
			lists := make([][]int, c.NumReplicas)
			for rank := range c.NumReplicas {
				s := newDS(t, c.N, SamplerReplicas(c.NumReplicas), SamplerRank(rank),
					SamplerDropLast(c.DropLast), SamplerSeed(seed))
				s.SetEpoch(epoch)
				lists[rank] = s.Indices()
				require.Len(t, lists[rank], c.Len[rank])
				union = append(union, lists[rank]...)
			}
			// Reassemble the strided split: position p of the global order
			// went to rank p%R at slot p/R. Applying the same split to torch's
			// unshuffled lists maps positions to the permutation.
			for rank := range c.NumReplicas {
				for slot, pos := range c.Indices[rank] { // torch's list without shuffle = global positions
					assert.Equal(t, perm[pos%c.N], lists[rank][slot], "rank %d slot %d", rank, slot)
				}
			}
			total := c.Len[0] * c.NumReplicas
			counts := map[int]int{}
			for _, i := range union {
				counts[i]++
			}
			if c.DropLast {
				assert.Equal(t, total, len(counts), "no duplicates with drop_last")
			} else {
				for i := range c.N {
					assert.GreaterOrEqual(t, counts[i], 1, "sample %d never seen", i)
				}
				assert.Equal(t, total-c.N, len(union)-len(counts), "duplicates are exactly the padding")
			}
		})
	}
}

func TestDistributedSamplerDeterministic(t *testing.T) {
	for _, tc := range []struct {
		n, r  int
		seed  uint64
		epoch int
	}{{100, 4, 0, 0}, {1000, 3, 17, 9}, {7, 8, 1, 1}} {
		for rank := range tc.r {
			a := newDS(t, tc.n, SamplerReplicas(tc.r), SamplerRank(rank), SamplerSeed(tc.seed))
			b := newDS(t, tc.n, SamplerReplicas(tc.r), SamplerRank(rank), SamplerSeed(tc.seed))
			a.SetEpoch(tc.epoch)
			b.SetEpoch(tc.epoch)
			assert.Equal(t, a.Indices(), b.Indices())
			assert.Equal(t, a.Indices(), a.Indices(), "repeatable within a run")
		}
	}
	// The epoch changes the order.
	s := newDS(t, 1000, SamplerReplicas(2), SamplerRank(0))
	e0 := s.Indices()
	s.SetEpoch(1)
	assert.NotEqual(t, e0, s.Indices())
	// A golden value pins the permutation across Go releases: changing it
	// would silently change every shuffled run.
	assert.Equal(t, []int{4, 1, 7, 5, 6, 9, 0, 3, 2, 8}, Permutation(10, 0))
}

func TestDistributedSamplerExactlyOnce(t *testing.T) {
	for _, tc := range []struct{ n, r int }{{10, 3}, {2048, 2}, {101, 4}, {5, 8}} {
		for _, eval := range []bool{false, true} {
			seen := make([]int, tc.n)
			for rank := range tc.r {
				opts := []SamplerOption{SamplerReplicas(tc.r), SamplerRank(rank), SamplerSeed(3)}
				if eval {
					opts = append(opts, SamplerEval())
				}
				s := newDS(t, tc.n, opts...)
				s.SetEpoch(2)
				idx := s.Indices()
				assert.Len(t, idx, s.Len())
				for _, i := range idx {
					seen[i]++
				}
			}
			pad := 0
			for i, c := range seen {
				require.GreaterOrEqual(t, c, 1, "sample %d unseen", i)
				pad += c - 1
			}
			if eval {
				assert.Zero(t, pad, "eval mode never pads")
			} else {
				assert.Equal(t, (tc.n+tc.r-1)/tc.r*tc.r-tc.n, pad)
			}
		}
	}
}

type fakeTopology struct{ rank, size int }

func (f fakeTopology) Rank() int { return f.rank }
func (f fakeTopology) Size() int { return f.size }

// clearLaunchEnv blanks every launcher variable for the test (blank counts
// as unset), so a test run under mpirun or srun sees a clean environment.
func clearLaunchEnv(t *testing.T) {
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
		"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
		"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
		"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
		"SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"} {
		t.Setenv(k, "")
	}
}

func TestDistributedSamplerTopology(t *testing.T) {
	clearLaunchEnv(t)
	// Without SamplerGroup the sampler must see the world comm sees: under
	// mpirun or srun RANK/WORLD_SIZE are unset, and it used to fall back to
	// one replica, so every rank trained on all the data.
	for _, tc := range []struct {
		name        string
		env         map[string]string
		rank, world int
	}{
		{"mpirun", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}, 2, 4},
		{"MPICH", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3"}, 1, 3},
		{"srun", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}, 5, 8},
		{"torchrun beats srun", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "8"}, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s := newDS(t, 10)
			assert.Equal(t, tc.world, s.NumReplicas())
			assert.Equal(t, tc.rank, s.Rank())
		})
	}
	t.Run("half a launcher is an error", func(t *testing.T) {
		t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
		_, err := NewDistributedSampler(sized(10))
		require.ErrorIs(t, err, ErrConfig)
		assert.Contains(t, err.Error(), "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not")
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("WORLD_SIZE", "4")
		t.Setenv("RANK", "2")
		s := newDS(t, 10)
		assert.Equal(t, 4, s.NumReplicas())
		assert.Equal(t, 2, s.Rank())
	})
	t.Run("group wins over env", func(t *testing.T) {
		t.Setenv("WORLD_SIZE", "4")
		t.Setenv("RANK", "2")
		s := newDS(t, 10, SamplerGroup(fakeTopology{1, 3}))
		assert.Equal(t, 3, s.NumReplicas())
		assert.Equal(t, 1, s.Rank())
	})
	t.Run("explicit wins", func(t *testing.T) {
		s := newDS(t, 10, SamplerGroup(fakeTopology{1, 3}), SamplerRank(0))
		assert.Equal(t, 3, s.NumReplicas())
		assert.Equal(t, 0, s.Rank())
	})
	t.Run("single process default", func(t *testing.T) {
		s := newDS(t, 10)
		assert.Equal(t, 1, s.NumReplicas())
		assert.Equal(t, 10, s.Len())
	})
	for _, tc := range []struct {
		name string
		ws   string
		rk   string
		opts []SamplerOption
	}{
		{"bad env", "x", "0", nil},
		{"rank out of range", "", "", []SamplerOption{SamplerReplicas(2), SamplerRank(2)}},
		{"negative rank", "", "", []SamplerOption{SamplerReplicas(2), SamplerRank(-1)}},
		{"zero replicas", "", "", []SamplerOption{SamplerReplicas(0), SamplerRank(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ws != "" {
				t.Setenv("WORLD_SIZE", tc.ws)
				t.Setenv("RANK", tc.rk)
			}
			_, err := NewDistributedSampler(sized(10), tc.opts...)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestDistributedSamplerState(t *testing.T) {
	s := newDS(t, 100, SamplerReplicas(2), SamplerRank(1), SamplerSeed(9))
	s.SetEpoch(4)
	s.SetPosition(20)
	st := s.State()
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	var back SamplerState
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, st, back)

	r := newDS(t, 100, SamplerReplicas(2), SamplerRank(0), SamplerSeed(9)) // another rank may load rank 1's state
	require.NoError(t, r.LoadState(back))
	assert.Equal(t, 4, r.Epoch())
	assert.Equal(t, 20, r.Position())
	r.SetEpoch(4)
	assert.Equal(t, 20, r.Position(), "same epoch keeps the position")
	r.SetEpoch(5)
	assert.Equal(t, 0, r.Position(), "a new epoch starts at 0")

	for name, other := range map[string]*DistributedSampler{
		"seed":     newDS(t, 100, SamplerReplicas(2), SamplerRank(0), SamplerSeed(8)),
		"replicas": newDS(t, 100, SamplerReplicas(4), SamplerRank(0), SamplerSeed(9)),
		"length":   newDS(t, 99, SamplerReplicas(2), SamplerRank(0), SamplerSeed(9)),
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, other.LoadState(back), ErrState)
			assert.Equal(t, 0, other.Position())
		})
	}
}

// TestDistributedSamplerResumeMidEpoch interrupts a loader after a few
// batches, restores a fresh sampler from the saved state, and checks that the
// remaining batches are exactly those the uninterrupted run would have seen.
func TestDistributedSamplerResumeMidEpoch(t *testing.T) {
	ds := rangeDataset(t, 103)
	mk := func() (*DistributedSampler, *DataLoader) {
		s := newDS(t, ds.Len(), SamplerReplicas(3), SamplerRank(1), SamplerSeed(5))
		l, err := NewDataLoader(ds, BatchSize(4), WithSampler(s), NumWorkers(2))
		require.NoError(t, err)
		return s, l
	}
	ctx := context.Background()
	_, full := mk()
	full.SetEpoch(2)
	var want [][]int
	for b, err := range full.All(ctx) {
		require.NoError(t, err)
		want = append(want, b.Indices)
	}

	s1, l1 := mk()
	l1.SetEpoch(2)
	var got [][]int
	var saved SamplerState
	for b, err := range l1.All(ctx) {
		require.NoError(t, err)
		got = append(got, b.Indices)
		if len(got) == 3 {
			saved = s1.State() // checkpoint inside the loop body
			break
		}
	}
	assert.Equal(t, 12, saved.Position)

	s2, l2 := mk()
	require.NoError(t, s2.LoadState(saved))
	s2.SetEpoch(saved.Epoch) // the training loop's usual call keeps the position
	for b, err := range l2.All(ctx) {
		require.NoError(t, err)
		got = append(got, b.Indices)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, s2.Len(), s2.Position(), "pass finished")

	// A second pass of the same epoch starts from the beginning again.
	var again [][]int
	for b, err := range l2.All(ctx) {
		require.NoError(t, err)
		again = append(again, b.Indices)
	}
	assert.Equal(t, want, again)
	assert.True(t, slices.Equal(want[0], again[0]))
}
