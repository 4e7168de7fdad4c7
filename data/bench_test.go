package data

import (
	"context"
	"fmt"
	"testing"

	"github.com/goddp/goddp/tensor"
)

// BenchmarkDataLoader measures batches/s for MNIST-sized samples (784
// float32 inputs, class labels) at batch 64 with a shuffling
// DistributedSampler, through the BatchGetter fast path and through per-sample
// Get + DefaultCollate, with and without worker goroutines.
func BenchmarkDataLoader(b *testing.B) {
	const n, feat, batch = 8192, 784, 64
	x := make([]float32, n*feat)
	for i := range x {
		x[i] = float32(i%255) / 255
	}
	y := make([]int, n)
	for i := range y {
		y[i] = i % 10
	}
	ds, err := NewLabeledDataset(tensor.FromF32(x, n, feat), y)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []struct {
		name string
		ds   Dataset
	}{{"batchgetter", ds}, {"collate", slowPath{ds}}} {
		for _, workers := range []int{0, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", path.name, workers), func(b *testing.B) {
				s, err := NewDistributedSampler(path.ds, SamplerReplicas(1), SamplerRank(0))
				if err != nil {
					b.Fatal(err)
				}
				l, err := NewDataLoader(path.ds, BatchSize(batch), WithSampler(s), NumWorkers(workers))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				done := 0
				for epoch := 0; done < b.N; epoch++ {
					s.SetEpoch(epoch)
					for bt, err := range l.All(ctx) {
						if err != nil {
							b.Fatal(err)
						}
						_ = bt
						if done++; done == b.N {
							break
						}
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
			})
		}
	}
}
