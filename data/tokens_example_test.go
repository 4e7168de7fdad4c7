package data_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goddp/goddp/data"
)

// Token shards as cmd/tokenize writes them, opened as training and
// validation sets and dealt to rank 0 of 2 by a DistributedSampler.
func ExampleOpenTokenSplits() {
	dir, err := os.MkdirTemp("", "tokens")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	toks := make([]uint16, 33) // 0, 1, ..., 32: (33-1)/4 = 8 windows of 4+1 tokens
	for i := range toks {
		toks[i] = uint16(i)
	}
	for _, name := range []string{"web_val_000000.bin", "web_train_000001.bin"} {
		if err := data.WriteTokenFile(filepath.Join(dir, name), toks, data.TokensLLMC); err != nil {
			panic(err)
		}
	}
	train, val, err := data.OpenTokenSplits(dir, 4) // sequence length 4
	if err != nil {
		panic(err)
	}
	defer train.Close()
	defer val.Close()
	fmt.Println("windows:", train.Len(), val.Len())

	sampler, err := data.NewDistributedSampler(train, data.SamplerReplicas(2), data.SamplerRank(0), data.SamplerSeed(1))
	if err != nil {
		panic(err)
	}
	loader, err := data.NewDataLoader(train, data.BatchSize(2), data.WithSampler(sampler))
	if err != nil {
		panic(err)
	}
	loader.SetEpoch(0)
	for b, err := range loader.All(context.Background()) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Indices, b.Inputs.Shape(), b.Inputs.I64()[:4], b.Targets.I64()[:4])
	}
	// Output:
	// windows: 8 8
	// [5 2] [2 4] [20 21 22 23] [21 22 23 24]
	// [7 1] [2 4] [28 29 30 31] [29 30 31 32]
}
