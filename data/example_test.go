package data_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// The seed Trainer's input side: a DistributedSampler feeding a DataLoader,
// with SetEpoch before each epoch. Here rank 1 of 2 replicas.
func Example() {
	x := make([]float32, 10*3)
	labels := make([]int, 10)
	for i := range labels {
		x[3*i] = float32(i)
		labels[i] = i % 2
	}
	ds, err := data.NewLabeledDataset(tensor.FromF32(x, 10, 3), labels)
	if err != nil {
		panic(err)
	}
	sampler, err := data.NewDistributedSampler(ds, data.SamplerReplicas(2), data.SamplerRank(1), data.SamplerShuffle(false))
	if err != nil {
		panic(err)
	}
	loader, err := data.NewDataLoader(ds, data.BatchSize(2), data.WithSampler(sampler), data.NumWorkers(2))
	if err != nil {
		panic(err)
	}
	fmt.Println("batches per epoch:", loader.Len())
	for epoch := range 2 {
		loader.SetEpoch(epoch)
		for b, err := range loader.All(context.Background()) {
			if err != nil {
				panic(err)
			}
			fmt.Println(epoch, b.Indices, b.Inputs.Shape(), b.Labels)
		}
	}
	// Output:
	// batches per epoch: 3
	// 0 [1 3] [2 3] [1 1]
	// 0 [5 7] [2 3] [1 1]
	// 0 [9] [1 3] [1]
	// 1 [1 3] [2 3] [1 1]
	// 1 [5 7] [2 3] [1 1]
	// 1 [9] [1 3] [1]
}

// Rank lists for 10 samples on 4 replicas, as torch computes them: padded by
// wrapping around, or truncated with drop_last.
func ExampleDistributedSampler() {
	for _, dropLast := range []bool{false, true} {
		var lists [][]int
		for rank := range 4 {
			s, err := data.NewDistributedSampler(data.NewSequentialSampler(10),
				data.SamplerReplicas(4), data.SamplerRank(rank), data.SamplerShuffle(false), data.SamplerDropLast(dropLast))
			if err != nil {
				panic(err)
			}
			lists = append(lists, s.Indices())
		}
		fmt.Println(lists)
	}
	// Output:
	// [[0 4 8] [1 5 9] [2 6 0] [3 7 1]]
	// [[0 4] [1 5] [2 6] [3 7]]
}

// Saving and restoring the sampler's position lets a resumed run continue
// mid-epoch.
func ExampleDistributedSampler_State() {
	s, _ := data.NewDistributedSampler(data.NewSequentialSampler(8), data.SamplerReplicas(1), data.SamplerRank(0), data.SamplerShuffle(false))
	ds, _ := data.NewTensorDataset(tensor.FromF32(make([]float32, 8), 8, 1), nil)
	loader, _ := data.NewDataLoader(ds, data.BatchSize(2), data.WithSampler(s))
	for b, err := range loader.All(context.Background()) {
		if err != nil {
			panic(err)
		}
		fmt.Println("first run:", b.Indices)
		break // e.g. the process dies here, after a checkpoint
	}
	saved := s.State()

	s2, _ := data.NewDistributedSampler(data.NewSequentialSampler(8), data.SamplerReplicas(1), data.SamplerRank(0), data.SamplerShuffle(false))
	if err := s2.LoadState(saved); err != nil {
		panic(err)
	}
	loader2, _ := data.NewDataLoader(ds, data.BatchSize(2), data.WithSampler(s2))
	for b, err := range loader2.All(context.Background()) {
		if err != nil {
			panic(err)
		}
		fmt.Println("resumed:", b.Indices)
	}
	// Output:
	// first run: [0 1]
	// resumed: [2 3]
	// resumed: [4 5]
	// resumed: [6 7]
}

func ExampleReadCSV() {
	ds, err := data.DecodeCSV(strings.NewReader("x1,x2,y\n1,2,0\n3,4,1\n"), "toy.csv",
		data.CSVOptions{Header: true, Target: "y", Labels: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(ds.Inputs().Shape(), ds.Labels())
	_, err = data.DecodeCSV(strings.NewReader("x1,x2\n1,oops\n"), "bad.csv", data.CSVOptions{Header: true})
	fmt.Println(err)
	// Output:
	// [2 2] [0 1]
	// data: malformed input: bad.csv: line 2, column 2: "oops" is not a number
}
