package data

import (
	"fmt"

	"github.com/goddp/goddp/internal/launchenv"
)

// Sized is anything with a length, such as a Dataset.
type Sized interface{ Len() int }

// Topology is the part of a process group the sampler needs; every
// comm.ProcessGroup satisfies it.
type Topology interface {
	Rank() int
	Size() int
}

// DistributedSampler restricts each rank to its share of a dataset
// (torch.utils.data.distributed.DistributedSampler), with torch's exact
// partition:
//
//	num_samples = ceil(N / R)               (or ceil((N-R)/R) with drop_last when R does not divide N)
//	total       = num_samples * R
//	order       = 0..N-1, or a permutation seeded by seed+epoch when shuffling
//	order       = order padded by wrapping around to total   (without drop_last)
//	            = order[:total]                              (with drop_last)
//	rank's list = order[rank:total:R]
//
// The lists equal torch's index for index, with shuffle off and with shuffle
// on: the permutation is torch.randperm(N) from a generator seeded with
// seed+epoch (see Permutation), as torch's sampler draws it.
//
// Beyond torch: SamplerEval gives every rank indices[rank:N:R] with no
// padding, so evaluation metrics count each sample exactly once; and the
// sampler remembers its position within the epoch (State, LoadState), which
// the DataLoader honours, so a resumed run continues mid-epoch.
//
// A DistributedSampler is not safe for concurrent use.
type DistributedSampler struct {
	n        int
	replicas int
	rank     int
	shuffle  bool
	seed     uint64
	dropLast bool
	eval     bool
	epoch    int
	pos      int
	// base > 0 marks an epoch resumed at another world size
	// (LoadStateElastic): this epoch's order from base on is what is left,
	// split over the ranks with no padding.
	base int
}

type samplerConfig struct {
	replicas, rank       int
	hasReplicas, hasRank bool
	pg                   Topology
	shuffle, dropLast    bool
	eval                 bool
	seed                 uint64
}

// SamplerOption configures NewDistributedSampler.
type SamplerOption func(*samplerConfig)

// SamplerReplicas sets the number of replicas (torch's num_replicas).
func SamplerReplicas(n int) SamplerOption {
	return func(c *samplerConfig) { c.replicas, c.hasReplicas = n, true }
}

// SamplerRank sets this process's rank.
func SamplerRank(r int) SamplerOption { return func(c *samplerConfig) { c.rank, c.hasRank = r, true } }

// SamplerGroup takes the replica count and rank from a process group, unless
// SamplerReplicas or SamplerRank set them explicitly.
func SamplerGroup(pg Topology) SamplerOption { return func(c *samplerConfig) { c.pg = pg } }

// SamplerShuffle turns shuffling on or off (default on, as in torch).
func SamplerShuffle(on bool) SamplerOption { return func(c *samplerConfig) { c.shuffle = on } }

// SamplerSeed sets the shuffle seed (default 0). It must be the same on every rank.
func SamplerSeed(seed uint64) SamplerOption { return func(c *samplerConfig) { c.seed = seed } }

// SamplerDropLast truncates the tail instead of padding (default off).
func SamplerDropLast(on bool) SamplerOption { return func(c *samplerConfig) { c.dropLast = on } }

// SamplerEval selects evaluation mode: no padding and no truncation, so ranks
// may get lists whose lengths differ by one. DropLast is ignored.
func SamplerEval() SamplerOption { return func(c *samplerConfig) { c.eval = true } }

// NewDistributedSampler returns a sampler over ds.Len() indices. The replica
// count and rank come from, in order: SamplerReplicas/SamplerRank, the
// SamplerGroup process group, the launcher's environment (torchrun/ddprun's
// RANK and WORLD_SIZE, or mpirun's or srun's variables, read as comm reads
// them), and finally 1 replica of rank 0 for a single-process run. A
// malformed environment is an error, never a silent single replica.
func NewDistributedSampler(ds Sized, opts ...SamplerOption) (*DistributedSampler, error) {
	c := samplerConfig{shuffle: true}
	for _, o := range opts {
		o(&c)
	}
	replicas, rank, err := c.resolveTopology()
	if err != nil {
		return nil, err
	}
	n := ds.Len()
	if n < 0 {
		return nil, fmt.Errorf("%w: dataset length %d", ErrConfig, n)
	}
	if replicas <= 0 {
		return nil, fmt.Errorf("%w: num_replicas %d must be positive", ErrConfig, replicas)
	}
	if rank < 0 || rank >= replicas {
		return nil, fmt.Errorf("%w: invalid rank %d, rank should be in the interval [0, %d]", ErrConfig, rank, replicas-1)
	}
	return &DistributedSampler{n: n, replicas: replicas, rank: rank, shuffle: c.shuffle,
		seed: c.seed, dropLast: c.dropLast, eval: c.eval}, nil
}

func (c *samplerConfig) resolveTopology() (replicas, rank int, err error) {
	replicas, rank = 1, 0
	switch {
	case c.pg != nil:
		replicas, rank = c.pg.Size(), c.pg.Rank()
	case !(c.hasReplicas && c.hasRank):
		env, err := launchenv.FromEnv()
		if err != nil {
			return 0, 0, fmt.Errorf("%w: reading the launcher's environment for the sampler's rank and replica count (or pass SamplerGroup): %w", ErrConfig, err)
		}
		replicas, rank = env.WorldSize, env.Rank
	}
	if c.hasReplicas {
		replicas = c.replicas
	}
	if c.hasRank {
		rank = c.rank
	}
	return replicas, rank, nil
}

// numSamples is torch's self.num_samples: the per-rank count in train mode.
func (s *DistributedSampler) numSamples() int {
	if s.dropLast && s.n%s.replicas != 0 {
		// ceil((N - R) / R), which is floor(N / R) for N > R.
		return ceilDiv(s.n-s.replicas, s.replicas)
	}
	return ceilDiv(s.n, s.replicas)
}

func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// Len is the number of indices this rank gets per epoch.
func (s *DistributedSampler) Len() int {
	if s.base > 0 {
		return ceilDiv(s.remaining()-s.rank, s.replicas)
	}
	if s.eval {
		return ceilDiv(s.n-s.rank, s.replicas)
	}
	return s.numSamples()
}

// TotalSize is the number of indices across all ranks per epoch, padding
// included (torch's total_size; N in eval mode).
func (s *DistributedSampler) TotalSize() int {
	if s.base > 0 {
		return s.remaining()
	}
	if s.eval {
		return s.n
	}
	return s.numSamples() * s.replicas
}

// Rank is this replica's rank.
func (s *DistributedSampler) Rank() int { return s.rank }

// NumReplicas is the number of replicas.
func (s *DistributedSampler) NumReplicas() int { return s.replicas }

// Epoch is the current epoch.
func (s *DistributedSampler) Epoch() int { return s.epoch }

// SetEpoch sets the epoch that seeds the shuffle (seed+epoch), as torch's
// set_epoch; call it before each epoch or every epoch sees the same order.
// Moving to a different epoch resets the position to the start; setting the
// current epoch again keeps it, so a run restored with LoadState can call
// SetEpoch(state.Epoch) and still continue mid-epoch.
func (s *DistributedSampler) SetEpoch(epoch int) {
	if epoch != s.epoch {
		s.pos, s.base = 0, 0
	}
	s.epoch = epoch
}

// Position is the number of this epoch's indices already consumed.
func (s *DistributedSampler) Position() int { return s.pos }

// SetPosition records that pos indices of this epoch were consumed. The
// DataLoader calls it; users normally do not.
func (s *DistributedSampler) SetPosition(pos int) { s.pos = max(pos, 0) }

// Indices returns this rank's whole index list for the current epoch (from
// the start, whatever the position).
func (s *DistributedSampler) Indices() []int {
	var order []int
	if s.shuffle {
		order = Permutation(s.n, s.seed+uint64(s.epoch))
	} else {
		order = identity(s.n)
	}
	total := s.TotalSize()
	if s.n == 0 {
		return []int{}
	}
	if s.base > 0 {
		// A resumed epoch: what is left of the order, dealt out as the
		// full epoch is, without padding.
		order = order[s.base : s.base+total]
	}
	if !s.eval && s.base == 0 {
		if total <= len(order) {
			order = order[:total]
		} else {
			padded := make([]int, total)
			for i := range padded { // wrap around, repeating as often as needed
				padded[i] = order[i%s.n]
			}
			order = padded
		}
	}
	out := make([]int, 0, s.Len())
	for i := s.rank; i < total; i += s.replicas {
		out = append(out, order[i])
	}
	return out
}

// SamplerState is a DistributedSampler's resumable state. It is plain data,
// JSON-encodable, and is stored in checkpoints. Seed, NumReplicas,
// DatasetLen, Shuffle, DropLast and Eval identify the partition and are
// checked by LoadState.
//
// Position counts this epoch's indices already consumed. A Position equal to
// the sampler's Len means the epoch was completed: resume with
// SetEpoch(Epoch+1). A Position between 0 and Len means resume mid-epoch:
// LoadState, then SetEpoch(Epoch) (which keeps the position) and iterate.
type SamplerState struct {
	Epoch       int    `json:"epoch"`
	Position    int    `json:"position"`
	Seed        uint64 `json:"seed"`
	NumReplicas int    `json:"num_replicas"`
	DatasetLen  int    `json:"dataset_len"`
	Shuffle     bool   `json:"shuffle"`
	DropLast    bool   `json:"drop_last"`
	Eval        bool   `json:"eval,omitempty"`
	// Base is where in the epoch's order a resumed epoch's partition
	// starts (0 for an epoch begun at this world size): the indices
	// before it were consumed under another NumReplicas.
	Base int `json:"base,omitempty"`
}

// Consumed is the number of entries of the epoch's global order (the
// shuffled 0..N-1) that the ranks had consumed together, capped at the
// dataset's length: in lockstep, each of NumReplicas ranks had taken
// Position indices of its list, which together are the order's first
// Position x NumReplicas entries from Base (the wrap-around padding of a
// full epoch repeats samples from the start, so it adds none).
func (st SamplerState) Consumed() int {
	return min(st.Base+st.Position*st.NumReplicas, st.DatasetLen)
}

// State returns the sampler's state. In a lockstep data-parallel run every
// rank has the same state, so rank 0's can be saved for all.
func (s *DistributedSampler) State() SamplerState {
	return SamplerState{Epoch: s.epoch, Position: s.pos, Seed: s.seed, NumReplicas: s.replicas,
		DatasetLen: s.n, Shuffle: s.shuffle, DropLast: s.dropLast, Eval: s.eval, Base: s.base}
}

// remaining is how many of a resumed epoch's samples the ranks share:
// the rest of the order, cut to a multiple of the replicas with DropLast.
func (s *DistributedSampler) remaining() int {
	left := s.n - s.base
	if s.dropLast {
		left -= left % s.replicas
	}
	return left
}

// LoadState restores the epoch and position. It fails with ErrState, changing
// nothing, when the state was saved by a sampler with a different partition
// (seed, replica count, dataset length or mode), since its position would
// then mean other samples.
func (s *DistributedSampler) LoadState(st SamplerState) error {
	want := s.State()
	want.Epoch, want.Position, want.Base = st.Epoch, st.Position, st.Base
	if st != want {
		return fmt.Errorf("%w: saved %+v, sampler has seed=%d num_replicas=%d dataset_len=%d shuffle=%v drop_last=%v eval=%v",
			ErrState, st, s.seed, s.replicas, s.n, s.shuffle, s.dropLast, s.eval)
	}
	if st.Position < 0 || st.Epoch < 0 || st.Base < 0 || st.Base > st.DatasetLen {
		return fmt.Errorf("%w: epoch %d, position %d or base %d out of range", ErrState, st.Epoch, st.Position, st.Base)
	}
	s.epoch, s.pos, s.base = st.Epoch, st.Position, st.Base
	return nil
}

// LoadStateElastic is LoadState for a job restarted at another world size
// (torchelastic's --nnodes MIN:MAX): a state saved with the same
// NumReplicas loads as LoadState does; one saved with another resumes its
// epoch with what the old ranks had not consumed (SamplerState.Consumed),
// dealt out over this sampler's replicas as rest[rank::replicas]. Every
// remaining sample of the epoch is then seen exactly once, by one rank: no
// padding, so the ranks' lists may differ in length by one; with DropLast
// the rest is cut to a multiple of the replicas instead. The epoch's
// shuffle is the same (seed+epoch). Call SetEpoch(st.Epoch), which keeps
// the resumed position, and iterate; the next epoch is an ordinary one.
//
// The seed, dataset length, shuffle and drop-last settings must match,
// and evaluation samplers do not re-shard (ErrState).
func (s *DistributedSampler) LoadStateElastic(st SamplerState) error {
	if st.NumReplicas == s.replicas {
		return s.LoadState(st)
	}
	if st.Eval || s.eval || st.Seed != s.seed || st.DatasetLen != s.n || st.Shuffle != s.shuffle || st.DropLast != s.dropLast {
		return fmt.Errorf("%w: saved %+v cannot resume on a sampler with seed=%d dataset_len=%d shuffle=%v drop_last=%v eval=%v "+
			"(only num_replicas may differ, and not for evaluation)", ErrState, st, s.seed, s.n, s.shuffle, s.dropLast, s.eval)
	}
	if st.Position < 0 || st.Epoch < 0 || st.Base < 0 || st.Base > st.DatasetLen || st.NumReplicas <= 0 {
		return fmt.Errorf("%w: epoch %d, position %d, base %d or num_replicas %d out of range", ErrState,
			st.Epoch, st.Position, st.Base, st.NumReplicas)
	}
	s.epoch, s.base, s.pos = st.Epoch, st.Consumed(), 0
	return nil
}
