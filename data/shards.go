package data

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/goddp/goddp/internal/launchenv"
	"github.com/goddp/goddp/tensor"
)

// ShardDataset is an iterable dataset over shard files (torch's
// IterableDataset, in the layout webdataset uses): data that does not fit
// in memory, or that arrives as many files, is read shard by shard while
// training runs, never all at once.
//
// A shard is one file:
//   - X.npy holds the inputs [n, ...]; a sibling X.labels.npy (integer
//     class indices [n]) or X.targets.npy ([n, ...]) holds what goes with
//     them, if present;
//   - X.tar holds samples as consecutive members sharing a key (the member
//     name up to its first dot, as webdataset groups them): KEY.npy or
//     KEY.input.npy is the input, KEY.cls the class index as decimal text,
//     KEY.target.npy a target. Other members are ignored.
//
// Each epoch the shards are dealt out to the (rank, worker) slots: shard j of
// the epoch's order goes to slot j mod (ranks × workers), and rank r's
// worker w is slot r×workers+w. The order is a permutation drawn from
// seed+epoch when shuffling (the same on every rank, so the slots never
// overlap), and the samples within a shard are shuffled too: npy shards by a
// full permutation (they are read row by row at known offsets), tar shards
// through a bounded shuffle buffer (they are read front to back). Every
// sample is therefore seen exactly once per epoch across all ranks and
// workers. Ranks can get different numbers of samples: train under
// ddp.(*DDP).Join so that a rank that runs out first shadows the others'
// collectives instead of hanging them.
//
// Iterate it with a StreamLoader. A ShardDataset holds only the shard index
// (paths and sample counts); it is safe for concurrent use once opened.
type ShardDataset struct {
	shards   []shard
	offsets  []int // global index of each shard's first sample, in path order
	total    int
	replicas int
	rank     int
	shuffle  bool
	seed     uint64
	buffer   int
}

type shardConfig struct {
	replicas, rank       int
	hasReplicas, hasRank bool
	pg                   Topology
	shuffle              bool
	seed                 uint64
	buffer               int
}

// ShardOption configures OpenShards.
type ShardOption func(*shardConfig)

// ShardReplicas sets the number of ranks the shards are dealt to (default:
// from the process group or the launcher's environment, as for
// DistributedSampler).
func ShardReplicas(n int) ShardOption {
	return func(c *shardConfig) { c.replicas, c.hasReplicas = n, true }
}

// ShardRank sets this process's rank among the replicas.
func ShardRank(r int) ShardOption { return func(c *shardConfig) { c.rank, c.hasRank = r, true } }

// ShardGroup takes the rank and replica count from a process group.
func ShardGroup(pg Topology) ShardOption { return func(c *shardConfig) { c.pg = pg } }

// ShardShuffle reshuffles the shard order and the samples within each shard
// every epoch (default true, as training wants).
func ShardShuffle(on bool) ShardOption { return func(c *shardConfig) { c.shuffle = on } }

// ShardSeed seeds the shuffles; every rank must use the same seed (default 0).
func ShardSeed(seed uint64) ShardOption { return func(c *shardConfig) { c.seed = seed } }

// ShardShuffleBuffer is the number of samples a tar shard's shuffle holds
// (webdataset's shuffle(n); default 1000). It bounds memory per worker to
// that many samples; npy shards need no buffer.
func ShardShuffleBuffer(n int) ShardOption { return func(c *shardConfig) { c.buffer = n } }

// shard is one file of the dataset.
type shard interface {
	path() string
	len() int
	// stream yields the shard's samples in an order drawn from rng (nil:
	// file order), each with its position in the shard. It stops when yield
	// returns false or ctx ends.
	stream(ctx context.Context, rng *tensor.RNG, buffer int, yield func(pos int, s Sample) bool) error
}

// OpenShards indexes the shard files at paths (see ShardDataset for the
// formats, told apart by extension). It reads each file's header or member
// list, not its data. An unreadable or malformed file is an error naming it.
func OpenShards(paths []string, opts ...ShardOption) (*ShardDataset, error) {
	cfg := shardConfig{shuffle: true, buffer: 1000}
	for _, o := range opts {
		o(&cfg)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: OpenShards: no shard files given", ErrConfig)
	}
	if cfg.buffer < 1 {
		return nil, fmt.Errorf("%w: ShardShuffleBuffer must be at least 1, got %d", ErrConfig, cfg.buffer)
	}
	replicas, rank, err := resolveShardTopology(cfg)
	if err != nil {
		return nil, err
	}
	d := &ShardDataset{replicas: replicas, rank: rank, shuffle: cfg.shuffle, seed: cfg.seed, buffer: cfg.buffer}
	for _, p := range paths {
		var s shard
		switch ext := strings.ToLower(filepath.Ext(p)); ext {
		case ".npy":
			s, err = openNPYShard(p)
		case ".tar":
			s, err = openTarShard(p)
		default:
			return nil, fmt.Errorf("%w: shard %s: unknown extension %q (want .npy or .tar)", ErrConfig, p, ext)
		}
		if err != nil {
			return nil, err
		}
		d.offsets = append(d.offsets, d.total)
		d.shards = append(d.shards, s)
		d.total += s.len()
	}
	return d, nil
}

func resolveShardTopology(c shardConfig) (replicas, rank int, err error) {
	replicas, rank = 1, 0
	switch {
	case c.pg != nil:
		replicas, rank = c.pg.Size(), c.pg.Rank()
	case !(c.hasReplicas && c.hasRank):
		env, err := launchenv.FromEnv()
		if err != nil {
			return 0, 0, fmt.Errorf("%w: reading the launcher's environment for the shards' rank and replica count (or pass ShardGroup): %w", ErrConfig, err)
		}
		replicas, rank = env.WorldSize, env.Rank
	}
	if c.hasReplicas {
		replicas = c.replicas
	}
	if c.hasRank {
		rank = c.rank
	}
	if replicas < 1 {
		return 0, 0, fmt.Errorf("%w: shards: replicas must be at least 1, got %d", ErrConfig, replicas)
	}
	if rank < 0 || rank >= replicas {
		return 0, 0, fmt.Errorf("%w: shards: rank %d out of range for %d replicas", ErrConfig, rank, replicas)
	}
	return replicas, rank, nil
}

// Len is the number of samples in all shards, over all ranks.
func (d *ShardDataset) Len() int { return d.total }

// NumShards is the number of shard files.
func (d *ShardDataset) NumShards() int { return len(d.shards) }

// Rank and NumReplicas are the topology the shards are dealt over.
func (d *ShardDataset) Rank() int { return d.rank }

// NumReplicas is the number of ranks the shards are dealt to.
func (d *ShardDataset) NumReplicas() int { return d.replicas }

// assignment lists the shards (indices in path order) that worker w of
// workers gets in epoch on this rank.
func (d *ShardDataset) assignment(epoch, w, workers int) []int {
	order := identity(len(d.shards))
	if d.shuffle {
		order = tensor.NewRNG(d.seed + uint64(epoch)).Perm(len(d.shards))
	}
	slots := d.replicas * workers
	slot := d.rank*workers + w
	var mine []int
	for j := slot; j < len(order); j += slots {
		mine = append(mine, order[j])
	}
	return mine
}

// Samples is the number of samples this rank sees in epoch when read by
// workers workers.
func (d *ShardDataset) Samples(epoch, workers int) int {
	n := 0
	for w := range max(workers, 1) {
		for _, i := range d.assignment(epoch, w, max(workers, 1)) {
			n += d.shards[i].len()
		}
	}
	return n
}

// shardRNG is the generator of shard i's sample order in epoch (nil when
// not shuffling). Mixing the shard index into the seed keeps the shards'
// orders independent; it depends only on (seed, epoch, shard), so a shard
// is read in the same order whichever rank or worker gets it.
func (d *ShardDataset) shardRNG(epoch, i int) *tensor.RNG {
	if !d.shuffle {
		return nil
	}
	return tensor.NewRNG(d.seed ^ (uint64(epoch)+1)*0x9E3779B97F4A7C15 ^ (uint64(i)+1)*0xBF58476D1CE4E5B9)
}
