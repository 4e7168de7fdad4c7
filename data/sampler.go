package data

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Sampler yields the dataset indices of one pass (torch's Sampler). The
// DataLoader calls Indices once per iteration.
type Sampler interface {
	// Len is the number of indices one pass yields.
	Len() int
	// Indices returns this pass's index order.
	Indices() []int
}

// EpochSetter is a sampler whose order depends on the epoch
// (DistributedSampler.set_epoch in torch). DataLoader.SetEpoch forwards to it.
type EpochSetter interface {
	SetEpoch(epoch int)
}

// Resumable is a sampler that remembers how many of this pass's indices were
// consumed, so that a run restored from a checkpoint continues mid-epoch. The
// DataLoader starts at Position() and calls SetPosition after each batch it
// hands out. A position at or past Len() means the pass is finished; the next
// iteration then starts a fresh pass at 0.
type Resumable interface {
	Position() int
	SetPosition(pos int)
}

// BatchSampler yields the index lists of whole batches (torch's
// batch_sampler).
type BatchSampler interface {
	// Len is the number of batches one pass yields.
	Len() int
	// Batches returns this pass's batches.
	Batches() [][]int
}

// SequentialSampler yields 0..n-1 in order (torch's SequentialSampler).
type SequentialSampler struct{ n int }

// NewSequentialSampler returns a sampler over n indices.
func NewSequentialSampler(n int) *SequentialSampler { return &SequentialSampler{n: n} }

// Len is n.
func (s *SequentialSampler) Len() int { return s.n }

// Indices returns 0..n-1.
func (s *SequentialSampler) Indices() []int { return identity(s.n) }

// RandomSampler yields a permutation of 0..n-1 that depends only on the seed
// and the pass number: torch.randperm(n) from a generator seeded with
// seed+pass (torch's RandomSampler draws its own seed unless given a
// generator, so its orders cannot be reproduced across runs anyway). Each
// call to Indices advances the pass number; SetEpoch sets it, so that
// sampler.SetEpoch(e) makes epoch e's order reproducible.
type RandomSampler struct {
	n    int
	seed uint64
	pass int
}

// NewRandomSampler returns a seeded random sampler over n indices.
func NewRandomSampler(n int, seed uint64) *RandomSampler { return &RandomSampler{n: n, seed: seed} }

// Len is n.
func (s *RandomSampler) Len() int { return s.n }

// SetEpoch sets the pass number used by the next Indices call.
func (s *RandomSampler) SetEpoch(epoch int) { s.pass = epoch }

// Indices returns the permutation for the current pass and advances it.
func (s *RandomSampler) Indices() []int {
	p := Permutation(s.n, s.seed+uint64(s.pass))
	s.pass++
	return p
}

type batchSampler struct {
	s        Sampler
	size     int
	dropLast bool
}

// NewBatchSampler groups a sampler's indices into batches of batchSize; the
// last, short batch is dropped when dropLast is set (torch's BatchSampler).
func NewBatchSampler(s Sampler, batchSize int, dropLast bool) (BatchSampler, error) {
	if batchSize <= 0 {
		return nil, fmt.Errorf("%w: batch size %d must be positive", ErrConfig, batchSize)
	}
	return &batchSampler{s: s, size: batchSize, dropLast: dropLast}, nil
}

func (b *batchSampler) Len() int { return numBatches(b.s.Len(), b.size, b.dropLast) }

func (b *batchSampler) Batches() [][]int { return chunk(b.s.Indices(), b.size, b.dropLast) }

func numBatches(n, size int, dropLast bool) int {
	if dropLast {
		return n / size
	}
	return (n + size - 1) / size
}

func chunk(idx []int, size int, dropLast bool) [][]int {
	out := make([][]int, 0, numBatches(len(idx), size, dropLast))
	for start := 0; start < len(idx); start += size {
		end := min(start+size, len(idx))
		if end-start < size && dropLast {
			break
		}
		out = append(out, idx[start:end:end])
	}
	return out
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// Permutation returns torch.randperm(n, generator=g) for a generator g
// seeded with seed (g.manual_seed(seed)): the same list, index for index, as
// PyTorch's CPU randperm, and identical across runs, ranks and Go releases.
func Permutation(n int, seed uint64) []int { return tensor.NewRNG(seed).Perm(n) }
