package gpt2_test

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/models/gpt2"
	"github.com/goddp/goddp/tensor"
)

// Example builds a small GPT-2, takes one training loss and gradient,
// and samples from it.
func Example() {
	cfg := gpt2.Config{VocabSize: 100, BlockSize: 16, Layers: 2, Heads: 2, Embd: 32}.Padded(64)
	m, err := gpt2.New(tensor.NewRNG(1337), cfg)
	if err != nil {
		panic(err)
	}
	x := tensor.FromI64([]int64{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4) // token ids [B, T]
	y := tensor.FromI64([]int64{2, 3, 4, 5, 6, 7, 8, 9}, 2, 4) // the next tokens
	logits := m.Forward(autograd.Const(x))
	loss := m.Loss(logits, y)
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	fmt.Println("parameters:", cfg.NumParams())
	fmt.Println("logits:", logits.Shape())
	fmt.Println("wte grad:", m.Transformer.WTE.Weight.Grad.Shape())

	out, err := m.Generate([]int{1, 2, 3}, gpt2.SampleOptions{MaxNewTokens: 5, Temperature: 0.8, TopK: 20, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("sampled:", len(out), "tokens")
	// Output:
	// parameters: 30080
	// logits: [2 4 128]
	// wte grad: [128 32]
	// sampled: 5 tokens
}
