package data_test

import (
	"context"
	"fmt"
	"os"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// A dataset written as shards and read back as a stream, by rank 0 of 2:
// it gets the shards its slot is dealt this epoch, and rank 1 the others.
func ExampleStreamLoader() {
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	x := make([]float32, 12*2)
	labels := make([]int, 12)
	for i := range labels {
		x[2*i], x[2*i+1], labels[i] = float32(i), float32(-i), i%3
	}
	ds, _ := data.NewLabeledDataset(tensor.FromF32(x, 12, 2), labels)
	paths, err := data.WriteShards(ds, dir, "train", 4, data.ShardTar) // 3 shards of 4
	if err != nil {
		panic(err)
	}

	shards, err := data.OpenShards(paths, data.ShardRank(0), data.ShardReplicas(2), data.ShardSeed(1))
	if err != nil {
		panic(err)
	}
	loader, _ := data.NewStreamLoader(shards, data.BatchSize(4))
	loader.SetEpoch(0)
	seen := 0
	for b, err := range loader.All(context.Background()) {
		if err != nil {
			panic(err)
		}
		seen += b.Size()
	}
	fmt.Println("rank 0 of 2 read", seen, "of", shards.Len(), "samples in", loader.Len(), "batches")
	// Output: rank 0 of 2 read 8 of 12 samples in 2 batches
}
