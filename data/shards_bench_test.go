package data

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/goddp/goddp/tensor"
)

// BenchmarkLoaderFashionMNISTSized compares the loaders on 60000 samples of
// [1, 28, 28] float32 (Fashion-MNIST's shape), batch 64, rank 0 of 2, two
// workers: the map-style DataLoader over a TensorDataset, and the
// StreamLoader over the same data as npy and as tar shards of 5000.
func BenchmarkLoaderFashionMNISTSized(b *testing.B) {
	const n = 60000
	rng := tensor.NewRNG(1)
	x := rng.Uniform(tensor.Float32, 0, 1, n, 1, 28, 28)
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % 10
	}
	ds, err := NewLabeledDataset(x, labels)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	shards := map[ShardFormat][]string{}
	for _, f := range []ShardFormat{ShardNPY, ShardTar} {
		p, err := WriteShards(ds, filepath.Join(dir), string(f), 5000, f)
		if err != nil {
			b.Fatal(err)
		}
		shards[f] = p
	}
	run := func(b *testing.B, all func() (int, error)) {
		samples := 0
		for b.Loop() {
			k, err := all()
			if err != nil {
				b.Fatal(err)
			}
			samples += k
		}
		b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
	}
	b.Run("map", func(b *testing.B) {
		s, _ := NewDistributedSampler(ds, SamplerRank(0), SamplerReplicas(2))
		l, _ := NewDataLoader(ds, BatchSize(64), WithSampler(s), NumWorkers(2))
		run(b, func() (int, error) {
			k := 0
			for bt, err := range l.All(context.Background()) {
				if err != nil {
					return k, err
				}
				k += bt.Size()
			}
			return k, nil
		})
	})
	for _, f := range []ShardFormat{ShardNPY, ShardTar} {
		b.Run(fmt.Sprint(f), func(b *testing.B) {
			sd, err := OpenShards(shards[f], ShardRank(0), ShardReplicas(2))
			if err != nil {
				b.Fatal(err)
			}
			l, _ := NewStreamLoader(sd, BatchSize(64), NumWorkers(2))
			run(b, func() (int, error) {
				k := 0
				for bt, err := range l.All(context.Background()) {
					if err != nil {
						return k, err
					}
					k += bt.Size()
				}
				return k, nil
			})
		})
	}
}
