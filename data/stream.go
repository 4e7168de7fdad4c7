package data

import (
	"context"
	"fmt"
	"iter"
	"sync"
)

// StreamLoader batches a ShardDataset (torch's DataLoader over an
// IterableDataset):
//
//	ds, err := data.OpenShards(paths, data.ShardGroup(pg), data.ShardSeed(0))
//	loader, err := data.NewStreamLoader(ds, data.BatchSize(64), data.NumWorkers(2))
//	for epoch := range epochs {
//		loader.SetEpoch(epoch)
//		for b, err := range loader.All(ctx) { ... }
//	}
//
// Each of max(NumWorkers, 1) goroutines reads the shards dealt to its
// (rank, worker) slot and cuts its own samples into batches, as torch's
// workers do; the loader takes batches from the workers in turn (worker 0,
// 1, ..., 0, ...; a worker that has finished drops out of the turn), so the
// sequence of batches depends only on the seed, the epoch and the topology,
// never on timing. A worker's last batch may be short (dropped with
// DropLast).
//
// Memory is bounded: each worker holds at most PrefetchFactor finished
// batches (default 2), the batch it is filling, and for tar shards its
// shuffle buffer; npy shards are read row by row.
//
// A StreamLoader is not safe for concurrent iteration.
type StreamLoader struct {
	ds       *ShardDataset
	batch    int
	dropLast bool
	workers  int
	prefetch int
	collate  CollateFunc
	epoch    int
}

// NewStreamLoader makes a loader over ds. It takes BatchSize, DropLast,
// NumWorkers, PrefetchFactor and WithCollate; shuffling and the seed belong
// to the dataset (ShardShuffle, ShardSeed), and samplers do not apply to a
// stream: passing Shuffle, Seed, WithSampler or WithBatchSampler is an error.
func NewStreamLoader(ds *ShardDataset, opts ...LoaderOption) (*StreamLoader, error) {
	if ds == nil {
		return nil, fmt.Errorf("%w: NewStreamLoader: nil dataset", ErrConfig)
	}
	c := loaderConfig{batchSize: 1}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.shuffle || c.seed != 0:
		return nil, fmt.Errorf("%w: a stream is shuffled by its dataset: use ShardShuffle and ShardSeed with OpenShards, not Shuffle or Seed", ErrConfig)
	case c.sampler != nil || c.batchSampler != nil:
		return nil, fmt.Errorf("%w: a stream has no indices to sample: WithSampler and WithBatchSampler do not apply to NewStreamLoader", ErrConfig)
	case c.batchSize < 1:
		return nil, fmt.Errorf("%w: batch size must be positive, got %d", ErrConfig, c.batchSize)
	case c.workers < 0:
		return nil, fmt.Errorf("%w: NumWorkers must not be negative, got %d", ErrConfig, c.workers)
	case c.hasPrefetch && c.prefetch < 1:
		return nil, fmt.Errorf("%w: PrefetchFactor must be at least 1, got %d", ErrConfig, c.prefetch)
	}
	l := &StreamLoader{ds: ds, batch: c.batchSize, dropLast: c.dropLast, workers: max(c.workers, 1),
		prefetch: 2, collate: c.collate}
	if c.hasPrefetch {
		l.prefetch = c.prefetch
	}
	if l.collate == nil {
		l.collate = DefaultCollate
	}
	return l, nil
}

// SetEpoch selects the epoch whose shard deal and shuffles All uses (call it
// before each epoch, as with DistributedSampler).
func (l *StreamLoader) SetEpoch(epoch int) { l.epoch = epoch }

// Epoch is the epoch set last.
func (l *StreamLoader) Epoch() int { return l.epoch }

// Dataset is the loader's dataset.
func (l *StreamLoader) Dataset() *ShardDataset { return l.ds }

// Len is the number of batches this rank yields in the current epoch. It
// can differ between ranks when the shards do not divide evenly.
func (l *StreamLoader) Len() int {
	n := 0
	for w := range l.workers {
		s := 0
		for _, i := range l.ds.assignment(l.epoch, w, l.workers) {
			s += l.ds.shards[i].len()
		}
		n += numBatches(s, l.batch, l.dropLast)
	}
	return n
}

type streamItem struct {
	b   Batch
	err error
}

// All yields this rank's batches of the current epoch. The first error (an
// unreadable or malformed shard, a failed collate, or ctx ending) is
// yielded as the last element. Breaking out of the loop stops the workers
// before All returns.
func (l *StreamLoader) All(ctx context.Context) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() {
			cancel()
			wg.Wait()
		}()
		chans := make([]chan streamItem, l.workers)
		for w := range l.workers {
			chans[w] = make(chan streamItem, l.prefetch)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(chans[w])
				l.work(ctx, w, chans[w])
			}()
		}
		live := chans
		for k := 0; len(live) > 0; {
			k %= len(live)
			var it streamItem
			var ok bool
			select {
			case it, ok = <-live[k]:
			case <-ctx.Done():
				yield(Batch{}, fmt.Errorf("data: stream: %w", ctx.Err()))
				return
			}
			if !ok {
				live = append(live[:k], live[k+1:]...)
				continue
			}
			if it.err != nil {
				yield(Batch{}, it.err)
				return
			}
			if !yield(it.b, nil) {
				return
			}
			k++
		}
		// Workers also stop when the caller's ctx ends; that is not the end
		// of the epoch.
		if err := ctx.Err(); err != nil {
			yield(Batch{}, fmt.Errorf("data: stream: %w", err))
		}
	}
}

// work reads worker w's shards and sends its batches to out.
func (l *StreamLoader) work(ctx context.Context, w int, out chan<- streamItem) {
	send := func(it streamItem) bool {
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	samples := make([]Sample, 0, l.batch)
	indices := make([]int, 0, l.batch)
	emit := func() bool {
		b, err := l.collate(samples)
		if err != nil {
			return send(streamItem{err: fmt.Errorf("data: stream: collate of samples %v: %w", indices, err)})
		}
		b.Indices = append([]int(nil), indices...)
		samples, indices = samples[:0], indices[:0]
		return send(streamItem{b: b})
	}
	for _, i := range l.ds.assignment(l.epoch, w, l.workers) {
		sh := l.ds.shards[i]
		stop := false
		err := sh.stream(ctx, l.ds.shardRNG(l.epoch, i), l.ds.buffer, func(pos int, s Sample) bool {
			if s.Input == nil {
				send(streamItem{err: fmt.Errorf("%w: shard %s: sample %d has no input", ErrFormat, sh.path(), pos)})
				stop = true
				return false
			}
			samples = append(samples, s)
			indices = append(indices, l.ds.offsets[i]+pos)
			if len(samples) == l.batch {
				stop = !emit()
			}
			return !stop
		})
		if stop {
			return
		}
		if err != nil {
			send(streamItem{err: err})
			return
		}
	}
	if len(samples) > 0 && !l.dropLast {
		emit()
	}
}
