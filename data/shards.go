package data

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
// Hostile or damaged files fail with an error naming the file (and the
// sample), never by exhausting memory: OpenShards checks every npy header
// against the file's size and refuses rows of zero bytes; it walks each tar
// shard's headers, refusing sparse members, members larger than the bytes
// left in the file or samples larger than ShardMaxSampleBytes, and a tar
// that does not end with its end-of-archive marker (a writer killed, a copy
// cut short), or whose sample count differs from the one WriteShards
// recorded in it. Reading checks each sample again as it is decoded.
//
// Supervision is required unless ShardUnlabeled says the data have none:
// every shard must carry labels or targets, the same kind in every shard
// (a shard without them otherwise trains every sample as class 0).
// ShardLabels, ShardTargets and ShardInputShape state what the model
// takes, so that a label outside the classes or an input of another shape
// is an error naming the shard and the sample rather than a panic in the
// loss or a layer; without ShardInputShape every sample must have the
// first shard's input shape.
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
	spec     *sampleSpec
}

type shardConfig struct {
	replicas, rank       int
	hasReplicas, hasRank bool
	pg                   Topology
	shuffle              bool
	seed                 uint64
	buffer               int
	unlabeled            bool
	needLabels           bool
	classes              int
	needTargets          bool
	targetShape          []int
	inputShape           []int
	maxSample            int64
}

// DefaultShardMaxSampleBytes is the default ShardMaxSampleBytes: far above
// an image or a text window, and low enough that a tar shuffle buffer of
// such samples is not a whole machine's memory at once.
const DefaultShardMaxSampleBytes = 256 << 20

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

// ShardUnlabeled says the data may carry neither labels nor targets (for a
// model that needs none); their samples then have Label 0. Without it
// (the default) a shard with neither is an error wrapping ErrUnlabeled.
func ShardUnlabeled(on bool) ShardOption { return func(c *shardConfig) { c.unlabeled = on } }

// ShardLabels says the samples must carry class labels (X.labels.npy, or
// KEY.cls in a tar), as a classification loss needs; classes > 0 also
// bounds every label to [0, classes), checked as each sample is decoded
// (CrossEntropy's range, so a bad label names its shard and sample).
func ShardLabels(classes int) ShardOption {
	return func(c *shardConfig) { c.needLabels, c.classes = true, classes }
}

// ShardTargets says the samples must carry targets (X.targets.npy, or
// KEY.target.npy in a tar), as a regression loss needs; a shape, if given,
// is the one every sample's target must have.
func ShardTargets(shape ...int) ShardOption {
	return func(c *shardConfig) { c.needTargets, c.targetShape = true, append([]int(nil), shape...) }
}

// ShardInputShape is the shape every sample's input must have (what the
// model takes, without the batch dimension). Default: the first shard's.
func ShardInputShape(shape ...int) ShardOption {
	return func(c *shardConfig) { c.inputShape = append([]int(nil), shape...) }
}

// ShardMaxSampleBytes caps the bytes of the members a tar sample is read
// from (default DefaultShardMaxSampleBytes): a header declaring more is an
// error at OpenShards, before anything is allocated for it.
func ShardMaxSampleBytes(n int64) ShardOption { return func(c *shardConfig) { c.maxSample = n } }

// sampleSpec is what every sample of a dataset must be, shared by its
// shards and fixed once OpenShards returns.
type sampleSpec struct {
	classes   int   // > 0: labels lie in [0, classes)
	input     []int // every input's shape (nil: not known, no samples)
	target    []int // every target's shape (nil: the shards have no targets)
	maxSample int64 // bytes of a tar sample's members
}

// checkLabel is the per-sample label check, done as the label is decoded
// (a compare or two); where names the sample in the error.
func (sp *sampleSpec) checkLabel(v int, where func() string) error {
	if sp.classes > 0 && (v < 0 || v >= sp.classes) {
		return fmt.Errorf("%w: %s: label %d outside [0, %d)", ErrLabel, where(), v, sp.classes)
	}
	return nil
}

// shardInfo is what a shard's index says its samples carry.
type shardInfo struct {
	labels, targets bool  // every sample has a label / a target
	input, target   []int // the first sample's input and target shapes (nil: no samples)
}

// shard is one file of the dataset.
type shard interface {
	path() string
	len() int
	// stream yields the shard's samples in an order drawn from rng (nil:
	// file order), each with its position in the shard. It stops when yield
	// returns false or ctx ends.
	stream(ctx context.Context, rng *tensor.RNG, buffer int, yield func(pos int, s Sample) bool) error
	info() shardInfo
	// setSpec gives the shard the dataset's checks before any stream.
	setSpec(sp *sampleSpec)
}

// OpenShards indexes the shard files at paths (see ShardDataset for the
// formats, told apart by extension). It reads each file's header or member
// list, not its data. An unreadable or malformed file is an error naming it.
func OpenShards(paths []string, opts ...ShardOption) (*ShardDataset, error) {
	cfg := shardConfig{shuffle: true, buffer: 1000, maxSample: DefaultShardMaxSampleBytes}
	for _, o := range opts {
		o(&cfg)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: OpenShards: no shard files given", ErrConfig)
	}
	if cfg.buffer < 1 {
		return nil, fmt.Errorf("%w: ShardShuffleBuffer must be at least 1, got %d", ErrConfig, cfg.buffer)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	replicas, rank, err := resolveShardTopology(cfg)
	if err != nil {
		return nil, err
	}
	spec := &sampleSpec{classes: cfg.classes, input: cfg.inputShape, target: cfg.targetShape, maxSample: cfg.maxSample}
	d := &ShardDataset{replicas: replicas, rank: rank, shuffle: cfg.shuffle, seed: cfg.seed, buffer: cfg.buffer, spec: spec}
	var first shard // the first shard with samples: the others must match it
	for _, p := range paths {
		var s shard
		switch ext := strings.ToLower(filepath.Ext(p)); ext {
		case ".npy":
			s, err = openNPYShard(p)
		case ".tar":
			s, err = openTarShard(p, cfg.maxSample)
		default:
			return nil, fmt.Errorf("%w: shard %s: unknown extension %q (want .npy or .tar)", ErrConfig, p, ext)
		}
		if err != nil {
			return nil, err
		}
		if s.len() > 0 {
			if err := cfg.check(s, first); err != nil {
				return nil, err
			}
			if first == nil {
				first = s
				if spec.input == nil {
					spec.input = s.info().input
				}
				if spec.target == nil {
					spec.target = s.info().target
				}
			}
		}
		s.setSpec(spec)
		d.offsets = append(d.offsets, d.total)
		d.shards = append(d.shards, s)
		d.total += s.len()
	}
	return d, nil
}

func (c shardConfig) validate() error {
	switch {
	case c.maxSample < 1:
		return fmt.Errorf("%w: ShardMaxSampleBytes must be at least 1, got %d", ErrConfig, c.maxSample)
	case c.classes < 0:
		return fmt.Errorf("%w: ShardLabels: classes must not be negative, got %d", ErrConfig, c.classes)
	case c.needLabels && c.needTargets:
		return fmt.Errorf("%w: ShardLabels and ShardTargets: a dataset's samples carry one kind of supervision", ErrConfig)
	}
	for _, sh := range [][]int{c.inputShape, c.targetShape} {
		if n, ok := checkedElems(sh, math.MaxInt32); len(sh) > 0 && (!ok || n == 0) {
			return fmt.Errorf("%w: sample shape %v holds no elements (or too many)", ErrConfig, sh)
		}
	}
	return nil
}

// check compares shard s (which has samples) with what the options require
// and with first, the first shard with samples (nil when s is it).
func (c shardConfig) check(s, first shard) error {
	in := s.info()
	switch {
	case c.needLabels && !in.labels && (in.targets || !c.unlabeled):
		return fmt.Errorf("%w: shard %s has no class labels (%s), and the model classifies%s", ErrUnlabeled, s.path(), labelsWhere(s), classesNote(c.classes))
	case c.needTargets && !in.targets && (in.labels || !c.unlabeled):
		return fmt.Errorf("%w: shard %s has no targets (%s), and the model regresses onto them", ErrUnlabeled, s.path(), targetsWhere(s))
	case !in.labels && !in.targets && !c.unlabeled:
		return fmt.Errorf("%w: shard %s has neither labels (%s) nor targets (%s); if the data are unlabeled, say so (ShardUnlabeled)", ErrUnlabeled, s.path(), labelsWhere(s), targetsWhere(s))
	}
	if want := c.inputShape; want != nil && !slices.Equal(in.input, want) {
		return fmt.Errorf("%w: shard %s: input shape %v, the model takes %v", ErrShape, s.path(), in.input, want)
	}
	if want := c.targetShape; want != nil && in.targets && !slices.Equal(in.target, want) {
		return fmt.Errorf("%w: shard %s: target shape %v, want %v", ErrShape, s.path(), in.target, want)
	}
	if first == nil {
		return nil
	}
	f := first.info()
	if in.labels != f.labels || in.targets != f.targets {
		return fmt.Errorf("%w: shard %s carries %s but shard %s carries %s: every shard must carry the same", ErrFormat, s.path(), in.kind(), first.path(), f.kind())
	}
	if c.inputShape == nil && !slices.Equal(in.input, f.input) {
		return fmt.Errorf("%w: shard %s: input shape %v, but shard %s's is %v", ErrShape, s.path(), in.input, first.path(), f.input)
	}
	if c.targetShape == nil && in.targets && !slices.Equal(in.target, f.target) {
		return fmt.Errorf("%w: shard %s: target shape %v, but shard %s's is %v", ErrShape, s.path(), in.target, first.path(), f.target)
	}
	return nil
}

func (in shardInfo) kind() string {
	switch {
	case in.labels && in.targets:
		return "labels and targets"
	case in.labels:
		return "labels"
	case in.targets:
		return "targets"
	}
	return "neither labels nor targets"
}

func classesNote(classes int) string {
	if classes > 0 {
		return fmt.Sprintf(" into %d classes", classes)
	}
	return ""
}

// labelsWhere and targetsWhere say where a shard's labels and targets
// would be.
func labelsWhere(s shard) string {
	if _, ok := s.(*tarShard); ok {
		return "no KEY.cls member"
	}
	return "no " + filepath.Base(strings.TrimSuffix(s.path(), ".npy")) + ".labels.npy beside it"
}

func targetsWhere(s shard) string {
	if _, ok := s.(*tarShard); ok {
		return "no KEY.target.npy member"
	}
	return "no " + filepath.Base(strings.TrimSuffix(s.path(), ".npy")) + ".targets.npy beside it"
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
