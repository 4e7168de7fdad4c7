package data

import (
	"context"
	"fmt"
	"iter"
	"sync"
)

// DataLoader batches a dataset (torch.utils.data.DataLoader). Iterate it
// with All:
//
//	for b, err := range loader.All(ctx) {
//		if err != nil { return err }
//		...
//	}
//
// With NumWorkers > 0, that many goroutines load batches ahead of the
// consumer, at most NumWorkers*PrefetchFactor batches in flight; batches are
// still yielded in sampler order, so the sequence is identical whatever the
// number of workers. The first error (a failed Get or collate, or ctx ending)
// is yielded as the last element; the loop then stops.
//
// A DataLoader is not safe for concurrent iteration.
type DataLoader struct {
	ds        Dataset
	cfg       loaderConfig
	sampler   Sampler      // nil when a batch sampler was given
	batches   BatchSampler // custom batch sampler, or nil
	collate   CollateFunc
	fastBatch BatchGetter // ds's batch getter when collate is the default
}

type loaderConfig struct {
	batchSize    int
	hasBatchSize bool
	shuffle      bool
	seed         uint64
	dropLast     bool
	sampler      Sampler
	batchSampler BatchSampler
	collate      CollateFunc
	workers      int
	prefetch     int
	hasPrefetch  bool
}

// LoaderOption configures NewDataLoader.
type LoaderOption func(*loaderConfig)

// BatchSize sets the number of samples per batch (default 1, as in torch).
func BatchSize(n int) LoaderOption {
	return func(c *loaderConfig) { c.batchSize, c.hasBatchSize = n, true }
}

// Shuffle draws a new seeded permutation each pass (a RandomSampler). It is
// mutually exclusive with WithSampler and WithBatchSampler.
func Shuffle(on bool) LoaderOption { return func(c *loaderConfig) { c.shuffle = on } }

// Seed seeds Shuffle's permutations (default 0).
func Seed(seed uint64) LoaderOption { return func(c *loaderConfig) { c.seed = seed } }

// DropLast drops the last batch when it is short.
func DropLast(on bool) LoaderOption { return func(c *loaderConfig) { c.dropLast = on } }

// WithSampler sets the index order, e.g. a DistributedSampler.
func WithSampler(s Sampler) LoaderOption { return func(c *loaderConfig) { c.sampler = s } }

// WithBatchSampler sets whole batches of indices; it excludes BatchSize,
// Shuffle, WithSampler and DropLast, as in torch.
func WithBatchSampler(b BatchSampler) LoaderOption {
	return func(c *loaderConfig) { c.batchSampler = b }
}

// WithCollate replaces DefaultCollate. The dataset's BatchGetter fast path is
// then not used.
func WithCollate(f CollateFunc) LoaderOption { return func(c *loaderConfig) { c.collate = f } }

// NumWorkers sets the number of loading goroutines (default 0: load in the
// consumer's goroutine, as torch's num_workers=0).
func NumWorkers(n int) LoaderOption { return func(c *loaderConfig) { c.workers = n } }

// PrefetchFactor sets the batches loaded ahead per worker (default 2, as in
// torch). It requires NumWorkers > 0.
func PrefetchFactor(n int) LoaderOption {
	return func(c *loaderConfig) { c.prefetch, c.hasPrefetch = n, true }
}

// NewDataLoader validates the options and returns a loader over ds.
func NewDataLoader(ds Dataset, opts ...LoaderOption) (*DataLoader, error) {
	c := loaderConfig{batchSize: 1, prefetch: 2}
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	l := &DataLoader{ds: ds, cfg: c, batches: c.batchSampler, collate: c.collate}
	if c.batchSampler == nil {
		switch {
		case c.sampler != nil:
			l.sampler = c.sampler
		case c.shuffle:
			l.sampler = NewRandomSampler(ds.Len(), c.seed)
		default:
			l.sampler = NewSequentialSampler(ds.Len())
		}
	}
	if l.collate == nil {
		l.collate = DefaultCollate
		l.fastBatch, _ = ds.(BatchGetter)
	}
	return l, nil
}

func (c *loaderConfig) validate() error {
	if c.batchSampler != nil && (c.hasBatchSize || c.shuffle || c.sampler != nil || c.dropLast) {
		return fmt.Errorf("%w: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last", ErrConfig)
	}
	if c.sampler != nil && c.shuffle {
		return fmt.Errorf("%w: sampler option is mutually exclusive with shuffle", ErrConfig)
	}
	if c.batchSize <= 0 {
		return fmt.Errorf("%w: batch size %d must be positive", ErrConfig, c.batchSize)
	}
	if c.workers < 0 {
		return fmt.Errorf("%w: num_workers %d must be >= 0", ErrConfig, c.workers)
	}
	if c.hasPrefetch && c.workers == 0 {
		return fmt.Errorf("%w: prefetch_factor needs num_workers > 0", ErrConfig)
	}
	if c.prefetch <= 0 {
		return fmt.Errorf("%w: prefetch_factor %d must be positive", ErrConfig, c.prefetch)
	}
	return nil
}

// Len is the number of batches in a full pass, like torch's len(loader).
func (l *DataLoader) Len() int {
	if l.batches != nil {
		return l.batches.Len()
	}
	return numBatches(l.sampler.Len(), l.cfg.batchSize, l.cfg.dropLast)
}

// Dataset returns the loader's dataset.
func (l *DataLoader) Dataset() Dataset { return l.ds }

// Sampler returns the loader's sampler, or nil when it uses a batch sampler.
func (l *DataLoader) Sampler() Sampler { return l.sampler }

// SetEpoch forwards to the sampler (or batch sampler) if it has SetEpoch.
func (l *DataLoader) SetEpoch(epoch int) {
	var s any = l.sampler
	if l.batches != nil {
		s = l.batches
	}
	if e, ok := s.(EpochSetter); ok {
		e.SetEpoch(epoch)
	}
}

// plan returns the batches of this pass and, for a Resumable sampler, the
// number of the pass's indices already consumed before the first of them.
func (l *DataLoader) plan() (batches [][]int, consumed, total int, res Resumable) {
	if l.batches != nil {
		return l.batches.Batches(), 0, 0, nil
	}
	idx := l.sampler.Indices()
	total = len(idx)
	if r, ok := l.sampler.(Resumable); ok {
		res = r
		consumed = r.Position()
		if consumed >= len(idx) || consumed < 0 { // finished pass: start a fresh one
			consumed = 0
		}
		idx = idx[consumed:]
		r.SetPosition(consumed)
	}
	return chunk(idx, l.cfg.batchSize, l.cfg.dropLast), consumed, total, res
}

func (l *DataLoader) load(indices []int) (Batch, error) {
	if l.fastBatch != nil {
		b, err := l.fastBatch.GetBatch(indices)
		if err != nil {
			return Batch{}, fmt.Errorf("data: get batch of %d samples starting at index %d: %w", len(indices), indices[0], err)
		}
		return b, nil
	}
	return collateFrom(l.ds, indices, l.collate)
}

type loadResult struct {
	b   Batch
	err error
}

type loadJob struct {
	indices []int
	res     chan loadResult // capacity 1: a worker never blocks on it
}

// All iterates over one pass. A Resumable sampler's position is advanced
// before each batch is yielded, so a checkpoint taken inside the loop body
// records that batch as consumed; a pass cut short (break, error, ctx) is
// continued, not restarted, by the next All unless SetEpoch moves to another
// epoch. Breaking out of the loop stops the workers and waits for them.
func (l *DataLoader) All(ctx context.Context) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		batches, consumed, total, res := l.plan()
		if res != nil && len(batches) == 0 {
			res.SetPosition(total) // nothing left (a short tail under DropLast): pass finished
		}
		done := 0
		advance := func(b []int) {
			consumed += len(b)
			done++
			if res != nil {
				if done == len(batches) {
					consumed = total // a dropped short tail counts as consumed too
				}
				res.SetPosition(consumed)
			}
		}
		if l.cfg.workers == 0 {
			for _, idx := range batches {
				if err := ctx.Err(); err != nil {
					yield(Batch{}, fmt.Errorf("data: loader stopped: %w", err))
					return
				}
				b, err := l.load(idx)
				if err != nil {
					yield(Batch{}, err)
					return
				}
				advance(idx)
				if !yield(b, nil) {
					return
				}
			}
			return
		}
		l.parallel(ctx, batches, advance, yield)
	}
}

func (l *DataLoader) parallel(ctx context.Context, batches [][]int, advance func([]int), yield func(Batch, error) bool) {
	inner, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	jobs := make(chan loadJob)
	// order bounds the batches in flight and fixes the yield order.
	order := make(chan loadJob, l.cfg.workers*l.cfg.prefetch)
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		for _, idx := range batches {
			j := loadJob{indices: idx, res: make(chan loadResult, 1)}
			select {
			case order <- j:
			case <-inner.Done():
				return
			}
			select {
			case jobs <- j:
			case <-inner.Done():
				return
			}
		}
	}()
	for range l.cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if inner.Err() != nil {
					return
				}
				b, err := l.load(j.indices)
				j.res <- loadResult{b, err}
			}
		}()
	}
	delivered := 0
	for j := range order {
		var r loadResult
		select {
		case r = <-j.res:
		case <-ctx.Done():
			yield(Batch{}, fmt.Errorf("data: loader stopped: %w", ctx.Err()))
			return
		}
		if r.err != nil {
			yield(Batch{}, r.err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(Batch{}, fmt.Errorf("data: loader stopped: %w", err))
			return
		}
		advance(j.indices)
		delivered++
		if !yield(r.b, nil) {
			return
		}
	}
	// order closes early only when inner was cancelled, i.e. ctx ended.
	if err := ctx.Err(); err != nil && delivered < len(batches) {
		yield(Batch{}, fmt.Errorf("data: loader stopped: %w", err))
	}
}
