package data

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// sampleValue is element k of global sample id's input: every sample is
// distinct, and its id can be read back from its first element.
func sampleValue(id, k int) float32 { return float32(id) + float32(k)/8 }

// writeNPYShard writes n samples with ids from first on, as X.npy with
// X.labels.npy beside it.
func writeNPYShard(t *testing.T, path string, first, n, width int) {
	t.Helper()
	x := make([]float32, n*width)
	lab := make([]int64, n)
	for i := range n {
		for k := range width {
			x[i*width+k] = sampleValue(first+i, k)
		}
		lab[i] = int64((first + i) % 10)
	}
	var b bytes.Buffer
	require.NoError(t, WriteNPY(&b, &Array{Shape: []int{n, width}, Data: x}))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	b.Reset()
	require.NoError(t, WriteNPY(&b, &Array{Shape: []int{n}, Data: lab}))
	require.NoError(t, os.WriteFile(path[:len(path)-len(".npy")]+".labels.npy", b.Bytes(), 0o644))
}

// writeTarShard writes n samples with ids from first on in webdataset's
// layout (KEY.npy, KEY.cls), plus a member of another kind that is ignored.
func writeTarShard(t *testing.T, path string, first, n, width int) {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, body []byte) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(body)
		require.NoError(t, err)
	}
	for i := range n {
		x := make([]float32, width)
		for k := range width {
			x[k] = sampleValue(first+i, k)
		}
		var b bytes.Buffer
		require.NoError(t, WriteNPY(&b, &Array{Shape: []int{width}, Data: x}))
		key := fmt.Sprintf("s/%06d", i)
		add(key+".npy", b.Bytes())
		add(key+".cls", []byte(fmt.Sprintf("%d\n", (first+i)%10)))
		add(key+".json", []byte(`{"ignored": true}`))
	}
	require.NoError(t, tw.Close())
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
}

// shardSet writes shards of uneven sizes, alternating npy and tar, and
// returns their paths and the total sample count.
func shardSet(t *testing.T, sizes []int, width int) ([]string, int) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	id := 0
	for j, n := range sizes {
		if j%2 == 0 {
			p := filepath.Join(dir, fmt.Sprintf("part-%03d.npy", j))
			writeNPYShard(t, p, id, n, width)
			paths = append(paths, p)
		} else {
			p := filepath.Join(dir, fmt.Sprintf("part-%03d.tar", j))
			writeTarShard(t, p, id, n, width)
			paths = append(paths, p)
		}
		id += n
	}
	return paths, id
}

func hashRow(x []float32) [32]byte {
	b := make([]byte, 4*len(x))
	for k, v := range x {
		u := math.Float32bits(v)
		b[4*k], b[4*k+1], b[4*k+2], b[4*k+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return sha256.Sum256(b)
}

// epochOf runs one epoch of rank's loader and returns its batches' indices
// and the hashes of the samples' inputs, checking each sample's content and
// label against its index.
func epochOf(t *testing.T, paths []string, rank, replicas, workers, batch, epoch int, opts ...LoaderOption) (ids []int, hashes [][32]byte, batches int) {
	t.Helper()
	ds, err := OpenShards(paths, ShardRank(rank), ShardReplicas(replicas), ShardSeed(7), ShardShuffleBuffer(4))
	require.NoError(t, err)
	l, err := NewStreamLoader(ds, append([]LoaderOption{BatchSize(batch), NumWorkers(workers)}, opts...)...)
	require.NoError(t, err)
	l.SetEpoch(epoch)
	for b, err := range l.All(context.Background()) {
		require.NoError(t, err)
		batches++
		x := b.Inputs.F32()
		width := b.Inputs.Shape()[1]
		require.Len(t, b.Labels, b.Size())
		for r, id := range b.Indices {
			row := x[r*width : (r+1)*width]
			require.Equal(t, sampleValue(id, 0), row[0], "sample %d's content", id)
			require.Equal(t, id%10, b.Labels[r], "sample %d's label", id)
			ids = append(ids, id)
			hashes = append(hashes, hashRow(row))
		}
	}
	require.Equal(t, l.Len(), batches, "Len() against the batches yielded")
	return ids, hashes, batches
}

func TestShardsEachSampleOncePerEpoch(t *testing.T) {
	sizes := []int{13, 20, 5, 31, 8, 17, 11, 2, 9}
	paths, total := shardSet(t, sizes, 6)
	// The expected set, by hash of each sample's input.
	want := map[[32]byte]bool{}
	for id := range total {
		row := make([]float32, 6)
		for k := range row {
			row[k] = sampleValue(id, k)
		}
		want[hashRow(row)] = true
	}
	require.Len(t, want, total)
	for _, tc := range []struct{ replicas, workers int }{{2, 2}, {1, 1}, {3, 2}, {2, 0}} {
		t.Run(fmt.Sprintf("%d_ranks_%d_workers", tc.replicas, tc.workers), func(t *testing.T) {
			var orders [][]int
			for epoch := range 3 {
				seen := map[[32]byte]int{}
				var all []int
				perRank := make([]int, tc.replicas)
				for rank := range tc.replicas {
					ids, hashes, _ := epochOf(t, paths, rank, tc.replicas, tc.workers, 4, epoch)
					for _, h := range hashes {
						seen[h]++
					}
					all = append(all, ids...)
					perRank[rank] = len(ids)
				}
				for h := range want {
					require.Equal(t, 1, seen[h], "epoch %d: a sample seen %d times", epoch, seen[h])
				}
				require.Len(t, seen, total, "epoch %d: samples outside the dataset", epoch)
				sorted := slices.Sorted(slices.Values(all))
				require.Equal(t, identity(total), sorted, "epoch %d: indices", epoch)
				orders = append(orders, all)
				t.Logf("epoch %d: samples per rank %v", epoch, perRank)
			}
			require.NotEqual(t, orders[0], orders[1], "epochs 0 and 1 read in the same order: no reshuffle")
		})
	}
}

func TestShardsOrderDependsOnlyOnSeedEpochTopology(t *testing.T) {
	paths, _ := shardSet(t, []int{7, 9, 4, 12, 6}, 3)
	a, _, _ := epochOf(t, paths, 1, 2, 2, 3, 5, PrefetchFactor(1))
	b, _, _ := epochOf(t, paths, 1, 2, 2, 3, 5, PrefetchFactor(8))
	require.Equal(t, a, b)
	ds, err := OpenShards(paths, ShardRank(0), ShardReplicas(1), ShardShuffle(false))
	require.NoError(t, err)
	l, err := NewStreamLoader(ds, BatchSize(5))
	require.NoError(t, err)
	var got []int
	for b, err := range l.All(context.Background()) {
		require.NoError(t, err)
		got = append(got, b.Indices...)
	}
	require.Equal(t, identity(ds.Len()), got, "without shuffling one worker reads the shards in file order")
}

func TestStreamLoaderBoundsReadAhead(t *testing.T) {
	paths, _ := shardSet(t, []int{40, 40, 40, 40}, 2)
	ds, err := OpenShards(paths, ShardRank(0), ShardReplicas(1))
	require.NoError(t, err)
	var made atomic.Int64
	count := func(s []Sample) (Batch, error) { made.Add(1); return DefaultCollate(s) }
	const workers, prefetch = 2, 2
	l, err := NewStreamLoader(ds, BatchSize(2), NumWorkers(workers), PrefetchFactor(prefetch), WithCollate(count))
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	n := 0
	for _, err := range l.All(context.Background()) {
		require.NoError(t, err)
		n++
		if n == 1 {
			time.Sleep(200 * time.Millisecond) // the workers run ahead while we wait
			// Each worker: prefetch finished batches in its channel, one
			// blocked in send; the consumer took one.
			require.LessOrEqual(t, made.Load(), int64(workers*(prefetch+1)+1), "batches made while the consumer held the first")
		}
		if n == 3 {
			break
		}
	}
	// All has returned, so its workers must be gone (checked without
	// require.Eventually, whose own goroutines would be counted).
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "workers outlived the loop")
}

func TestStreamLoaderCancel(t *testing.T) {
	paths, _ := shardSet(t, []int{50, 50}, 2)
	ds, err := OpenShards(paths, ShardRank(0), ShardReplicas(1))
	require.NoError(t, err)
	l, err := NewStreamLoader(ds, BatchSize(1), NumWorkers(2))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	n := 0
	for _, err := range l.All(ctx) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 2 {
			cancel()
		}
	}
	require.ErrorIs(t, last, context.Canceled)
	require.Less(t, n, 100)
}

func TestShardErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.npy")
	writeNPYShard(t, good, 0, 4, 2)

	trunc := filepath.Join(dir, "trunc.npy")
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(trunc, b[:len(b)-3], 0o644))
	_, err = OpenShards([]string{good, trunc}, ShardRank(0), ShardReplicas(1))
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, trunc)

	short := filepath.Join(dir, "short.npy")
	writeNPYShard(t, short, 0, 4, 2)
	var lb bytes.Buffer
	require.NoError(t, WriteNPY(&lb, &Array{Shape: []int{3}, Data: []int64{1, 2, 3}}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "short.labels.npy"), lb.Bytes(), 0o644))
	_, err = OpenShards([]string{short}, ShardRank(0), ShardReplicas(1))
	require.ErrorIs(t, err, ErrShape)
	require.ErrorContains(t, err, "short.labels.npy")

	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "a.cls", Size: 2, Mode: 0o644, Typeflag: tar.TypeReg}))
	_, _ = tw.Write([]byte("3\n"))
	require.NoError(t, tw.Close())
	noInput := filepath.Join(dir, "noinput.tar")
	require.NoError(t, os.WriteFile(noInput, tb.Bytes(), 0o644))
	_, err = OpenShards([]string{noInput}, ShardRank(0), ShardReplicas(1))
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, `sample "a" has no input`)

	_, err = OpenShards([]string{filepath.Join(dir, "x.parquet")}, ShardRank(0), ShardReplicas(1))
	require.ErrorIs(t, err, ErrConfig)
	_, err = OpenShards([]string{filepath.Join(dir, "missing.npy")}, ShardRank(0), ShardReplicas(1))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = OpenShards([]string{good}, ShardRank(2), ShardReplicas(2))
	require.ErrorIs(t, err, ErrConfig)

	ds, err := OpenShards([]string{good}, ShardRank(0), ShardReplicas(1))
	require.NoError(t, err)
	_, err = NewStreamLoader(ds, Shuffle(true))
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewStreamLoader(ds, WithSampler(NewSequentialSampler(4)))
	require.ErrorIs(t, err, ErrConfig)

	// A shard that goes bad after it was indexed fails the epoch with its name.
	ds, err = OpenShards([]string{good}, ShardRank(0), ShardReplicas(1))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(good, int64(len(b)-8)))
	l, err := NewStreamLoader(ds, BatchSize(2))
	require.NoError(t, err)
	var last error
	for _, err := range l.All(context.Background()) {
		if err != nil {
			last = err
		}
	}
	require.Error(t, last)
	require.ErrorContains(t, last, good)
	require.False(t, errors.Is(last, context.Canceled))
}

func TestShardNPYDtypes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "u8.npy")
	var b bytes.Buffer
	require.NoError(t, WriteNPY(&b, &Array{Shape: []int{3, 2, 2}, Data: []uint8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}}))
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	var tg bytes.Buffer
	require.NoError(t, WriteNPY(&tg, &Array{Shape: []int{3}, Data: []float64{0.5, 1.5, 2.5}}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "u8.targets.npy"), tg.Bytes(), 0o644))
	ds, err := OpenShards([]string{p}, ShardRank(0), ShardReplicas(1), ShardShuffle(false))
	require.NoError(t, err)
	l, err := NewStreamLoader(ds, BatchSize(3))
	require.NoError(t, err)
	for bt, err := range l.All(context.Background()) {
		require.NoError(t, err)
		require.Equal(t, []int{3, 2, 2}, bt.Inputs.Shape())
		require.Equal(t, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}, bt.Inputs.F32())
		require.Equal(t, []float32{0.5, 1.5, 2.5}, bt.Targets.F32())
		require.Equal(t, tensor.Float32, bt.Targets.DType())
	}
}

func TestWriteShardsRoundTrip(t *testing.T) {
	const n, width = 23, 5
	x := make([]float32, n*width)
	labels := make([]int, n)
	for i := range n {
		for k := range width {
			x[i*width+k] = sampleValue(i, k)
		}
		labels[i] = i % 7
	}
	src, err := NewLabeledDataset(tensor.FromF32(x, n, width), labels)
	require.NoError(t, err)
	for _, format := range []ShardFormat{ShardNPY, ShardTar} {
		t.Run(string(format), func(t *testing.T) {
			dir := t.TempDir()
			paths, err := WriteShards(src, dir, "fmnist", 10, format)
			require.NoError(t, err)
			require.Len(t, paths, 3)
			ds, err := OpenShards(paths, ShardRank(0), ShardReplicas(1), ShardShuffle(false))
			require.NoError(t, err)
			require.Equal(t, n, ds.Len())
			l, err := NewStreamLoader(ds, BatchSize(n))
			require.NoError(t, err)
			for b, err := range l.All(context.Background()) {
				require.NoError(t, err)
				require.Equal(t, identity(n), b.Indices)
				require.Equal(t, x, b.Inputs.F32())
				require.Equal(t, labels, b.Labels)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
			require.Empty(t, left, "temporary files left behind")
		})
	}
	_, err = WriteShards(src, t.TempDir(), "x", 0, ShardNPY)
	require.ErrorIs(t, err, ErrConfig)
	_, err = WriteShards(src, t.TempDir(), "x", 4, "parquet")
	require.ErrorIs(t, err, ErrConfig)
}
