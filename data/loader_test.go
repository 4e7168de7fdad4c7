package data

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// rangeDataset has sample i = input [i, -i], label i%10.
func rangeDataset(t testing.TB, n int) *TensorDataset {
	t.Helper()
	x := make([]float32, 2*n)
	y := make([]int, n)
	for i := range n {
		x[2*i], x[2*i+1] = float32(i), float32(-i)
		y[i] = i % 10
	}
	ds, err := NewLabeledDataset(tensor.FromF32(x, n, 2), y)
	require.NoError(t, err)
	return ds
}

// slowPath hides a dataset's BatchGetter, forcing Get + collate.
type slowPath struct{ Dataset }

// failing fails Get for one index.
type failing struct {
	Dataset
	bad   int
	calls atomic.Int64
}

var errBoom = errors.New("boom")

func (f *failing) Get(i int) (Sample, error) {
	f.calls.Add(1)
	if i == f.bad {
		return Sample{}, fmt.Errorf("reading record %d: %w", i, errBoom)
	}
	return f.Dataset.Get(i)
}

func collect(t *testing.T, l *DataLoader) ([]Batch, error) {
	t.Helper()
	var out []Batch
	for b, err := range l.All(context.Background()) {
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, nil
}

func TestDataLoaderBatches(t *testing.T) {
	ds := rangeDataset(t, 10)
	for _, tc := range []struct {
		name     string
		ds       Dataset
		opts     []LoaderOption
		wantLen  int
		wantIdxs [][]int
	}{
		{"default batch 1", ds, nil, 10, nil},
		{"batch 4", ds, []LoaderOption{BatchSize(4)}, 3, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}},
		{"batch 4 drop last", ds, []LoaderOption{BatchSize(4), DropLast(true)}, 2, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{"slow path", slowPath{ds}, []LoaderOption{BatchSize(4)}, 3, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}},
		{"batch sampler", ds, []LoaderOption{WithBatchSampler(fixedBatches{{9, 0}, {5}})}, 2, [][]int{{9, 0}, {5}}},
		{"subset", mustSubset(t, ds, []int{7, 3, 1}), []LoaderOption{BatchSize(2)}, 2, [][]int{{0, 1}, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewDataLoader(tc.ds, tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, tc.wantLen, l.Len())
			bs, err := collect(t, l)
			require.NoError(t, err)
			require.Len(t, bs, tc.wantLen)
			for k, b := range bs {
				if tc.wantIdxs != nil {
					assert.Equal(t, tc.wantIdxs[k], b.Indices)
				}
				require.Equal(t, []int{b.Size(), 2}, b.Inputs.Shape())
				require.Len(t, b.Labels, b.Size())
				assert.Nil(t, b.Targets)
				for r, i := range b.Indices {
					s, err := tc.ds.Get(i)
					require.NoError(t, err)
					assert.Equal(t, s.Input.F32(), b.Inputs.F32()[2*r:2*r+2])
					assert.Equal(t, s.Label, b.Labels[r])
				}
			}
		})
	}
}

type fixedBatches [][]int

func (f fixedBatches) Len() int         { return len(f) }
func (f fixedBatches) Batches() [][]int { return f }

func mustSubset(t *testing.T, ds Dataset, idx []int) *Subset {
	s, err := NewSubset(ds, idx)
	require.NoError(t, err)
	return s
}

func TestDataLoaderOrderIndependentOfWorkers(t *testing.T) {
	ds := rangeDataset(t, 257)
	var ref [][]int
	for _, workers := range []int{0, 1, 2, 3, 8} {
		for _, fast := range []bool{true, false} {
			var d Dataset = ds
			if !fast {
				d = slowPath{ds}
			}
			s := newDS(t, ds.Len(), SamplerReplicas(2), SamplerRank(1), SamplerSeed(11))
			s.SetEpoch(3)
			opts := []LoaderOption{BatchSize(7), WithSampler(s), NumWorkers(workers)}
			if workers > 0 {
				opts = append(opts, PrefetchFactor(3))
			}
			l, err := NewDataLoader(d, opts...)
			require.NoError(t, err)
			bs, err := collect(t, l)
			require.NoError(t, err)
			var got [][]int
			for _, b := range bs {
				got = append(got, b.Indices)
				for r, i := range b.Indices {
					require.Equal(t, float32(i), b.Inputs.F32()[2*r])
				}
			}
			if ref == nil {
				ref = got
			}
			require.Equal(t, ref, got, "workers=%d fast=%v", workers, fast)
		}
	}
}

func TestDataLoaderShuffleSeeded(t *testing.T) {
	ds := rangeDataset(t, 50)
	order := func(seed uint64) [][]int {
		l, err := NewDataLoader(ds, BatchSize(8), Shuffle(true), Seed(seed))
		require.NoError(t, err)
		var passes [][]int
		for range 2 {
			var p []int
			bs, err := collect(t, l)
			require.NoError(t, err)
			for _, b := range bs {
				p = append(p, b.Indices...)
			}
			passes = append(passes, p)
		}
		return passes
	}
	a, b := order(1), order(1)
	assert.Equal(t, a, b, "same seed, same order")
	assert.NotEqual(t, a[0], a[1], "each pass reshuffles")
	assert.NotEqual(t, a, order(2))
	assert.ElementsMatch(t, identity(50), a[0])
}

func TestDataLoaderTargetsAndFloat64(t *testing.T) {
	x := tensor.FromF64([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	y := tensor.FromF64([]float64{10, 20, 30}, 3, 1)
	ds, err := NewTensorDataset(x, y)
	require.NoError(t, err)
	for _, d := range []Dataset{ds, slowPath{ds}} {
		l, err := NewDataLoader(d, BatchSize(2))
		require.NoError(t, err)
		bs, err := collect(t, l)
		require.NoError(t, err)
		require.Len(t, bs, 2)
		assert.Equal(t, []float64{1, 2, 3, 4}, bs[0].Inputs.F64())
		assert.Equal(t, []float64{10, 20}, bs[0].Targets.F64())
		assert.Equal(t, []int{2, 1}, bs[0].Targets.Shape())
		assert.Nil(t, bs[0].Labels)
	}
}

func TestDataLoaderCustomCollate(t *testing.T) {
	ds := rangeDataset(t, 6)
	sum := func(samples []Sample) (Batch, error) {
		s := float32(0)
		for _, x := range samples {
			s += x.Input.F32()[0]
		}
		return Batch{Inputs: tensor.FromF32([]float32{s}, 1)}, nil
	}
	l, err := NewDataLoader(ds, BatchSize(3), WithCollate(sum), NumWorkers(2))
	require.NoError(t, err)
	bs, err := collect(t, l)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	assert.Equal(t, float32(0+1+2), bs[0].Inputs.F32()[0])
	assert.Equal(t, float32(3+4+5), bs[1].Inputs.F32()[0])
	assert.Equal(t, []int{3, 4, 5}, bs[1].Indices, "loader sets Indices")
}

func TestDataLoaderGetErrorReturned(t *testing.T) {
	for _, workers := range []int{0, 1, 4} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			f := &failing{Dataset: rangeDataset(t, 100), bad: 37}
			opts := []LoaderOption{BatchSize(5)}
			if workers > 0 {
				opts = append(opts, NumWorkers(workers))
			}
			l, err := NewDataLoader(f, opts...)
			require.NoError(t, err)
			bs, err := collect(t, l)
			require.ErrorIs(t, err, errBoom)
			assert.Contains(t, err.Error(), "sample 37")
			assert.Len(t, bs, 7, "batches before the failing one are delivered in order")
		})
	}
}

func TestDataLoaderCancel(t *testing.T) {
	ds := rangeDataset(t, 1000)
	before := runtime.NumGoroutine()
	for _, workers := range []int{0, 3} {
		ctx, cancel := context.WithCancel(context.Background())
		opts := []LoaderOption{BatchSize(10)}
		if workers > 0 {
			opts = append(opts, NumWorkers(workers))
		}
		l, err := NewDataLoader(ds, opts...)
		require.NoError(t, err)
		n := 0
		var last error
		for _, err := range l.All(ctx) {
			if err != nil {
				last = err
				break
			}
			n++
			if n == 5 {
				cancel()
			}
		}
		require.ErrorIs(t, last, context.Canceled)
		assert.Equal(t, 5, n)
		cancel()
	}
	// Breaking out early stops the workers too.
	l, err := NewDataLoader(ds, BatchSize(10), NumWorkers(4))
	require.NoError(t, err)
	for range l.All(context.Background()) {
		break
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "worker goroutines leaked")
}

func TestDataLoaderConfigErrors(t *testing.T) {
	ds := rangeDataset(t, 10)
	s := NewSequentialSampler(10)
	for name, opts := range map[string][]LoaderOption{
		"zero batch":              {BatchSize(0)},
		"sampler and shuffle":     {WithSampler(s), Shuffle(true)},
		"batch sampler and size":  {WithBatchSampler(fixedBatches{{1}}), BatchSize(2)},
		"batch sampler and drop":  {WithBatchSampler(fixedBatches{{1}}), DropLast(true)},
		"negative workers":        {NumWorkers(-1)},
		"prefetch without worker": {PrefetchFactor(4)},
		"zero prefetch":           {NumWorkers(1), PrefetchFactor(0)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewDataLoader(ds, opts...)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestCollateShapeMismatch(t *testing.T) {
	_, err := DefaultCollate([]Sample{
		{Input: tensor.FromF32([]float32{1, 2}, 2)},
		{Input: tensor.FromF32([]float32{1, 2, 3}, 3)},
	})
	require.ErrorIs(t, err, ErrShape)
	b, err := DefaultCollate(nil)
	require.NoError(t, err)
	assert.Nil(t, b.Inputs)
}

func TestDatasets(t *testing.T) {
	a := rangeDataset(t, 3)
	b := rangeDataset(t, 2)
	c := NewConcatDataset(a, b)
	require.Equal(t, 5, c.Len())
	var firsts []float32
	for i := range c.Len() {
		s, err := c.Get(i)
		require.NoError(t, err)
		firsts = append(firsts, s.Input.F32()[0])
	}
	assert.Equal(t, []float32{0, 1, 2, 0, 1}, firsts)
	_, err := c.Get(5)
	require.ErrorIs(t, err, ErrIndex)
	_, err = a.Get(-1)
	require.ErrorIs(t, err, ErrIndex)
	_, err = a.GetBatch([]int{0, 3})
	require.ErrorIs(t, err, ErrIndex)
	_, err = NewSubset(a, []int{0, 3})
	require.ErrorIs(t, err, ErrIndex)
	_, err = NewLabeledDataset(tensor.FromF32(make([]float32, 4), 2, 2), []int{1})
	require.ErrorIs(t, err, ErrShape)
	_, err = NewTensorDataset(tensor.FromF32(make([]float32, 4), 2, 2), tensor.FromF32(make([]float32, 3), 3))
	require.ErrorIs(t, err, ErrShape)
	assert.Equal(t, 0, NewConcatDataset().Len())

	// Subset of a dataset without a batch getter still batches.
	sub := mustSubset(t, slowPath{a}, []int{2, 0})
	bt, err := sub.GetBatch([]int{1, 0})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 2, -2}, bt.Inputs.F32())
	assert.Equal(t, []int{1, 0}, bt.Indices)
}
