// Command readme is the README's first training script: an MLP fitting
// y = tanh(x·w), trained with DDP on every rank the launcher starts.
package main

import (
	"os"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	_ "github.com/goddp/goddp/devices" // registers cuda and sim: -device cuda, sim, sim:N
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

func main() {
	defaults := trainer.Defaults{Epochs: 5, BatchSize: 32, SaveEvery: 1, CkptDir: "checkpoints/readme"}
	os.Exit(trainer.Main(os.Args, os.Stdout, defaults, func(rng *tensor.RNG) (trainer.Job, error) {
		x := tensor.Randn(rng, tensor.Float32, 4096, 16) // the same seed, so the same data, on every rank
		y := tensor.Tanh(tensor.MatMul(x, tensor.Randn(rng, tensor.Float32, 16, 1)))
		ds, err := data.NewTensorDataset(x, y)
		return trainer.Job{
			Name:    "readme",
			Dataset: ds, // each rank trains on its shard of it (a DistributedSampler)
			Model:   nn.NewSequential(nn.NewLinear(rng, 16, 64), nn.NewReLU(), nn.NewLinear(rng, 64, 1)),
			NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
				return optim.NewAdam(params, optim.DefaultAdam())
			},
			Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
				return autograd.MSELoss(out, autograd.Const(b.Targets), autograd.ReductionMean)
			},
		}, err
	}))
}
