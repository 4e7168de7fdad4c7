// Command mlp trains a 784-512-512-10 ReLU MLP with SGD and cross-entropy on
// 8192 synthetic MNIST-sized samples, batch 64 per rank: the workload of
// ../shared/anchors/torch_ddp_train.py's "mlp", for a side-by-side comparison
// with torch DDP + Gloo. Run it under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/mlp -epochs 5
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

var defaults = trainer.Defaults{Epochs: 5, BatchSize: 64, SaveEvery: 0, CkptDir: ""}

func main() { os.Exit(trainer.Main(os.Args, os.Stdout, defaults, build)) }

// build makes the job from the run's seed: data, model, optimizer and loss.
func build(rng *tensor.RNG) (trainer.Job, error) {
	const n, classes = 8192, 10
	x := tensor.Randn(rng, tensor.Float32, n, 784)
	labels := make([]int, n)
	for i := range labels {
		labels[i] = rng.IntN(classes)
	}
	ds, err := data.NewLabeledDataset(x, labels)
	if err != nil {
		return trainer.Job{}, err
	}
	model := nn.NewSequential(
		nn.NewLinear(rng, 784, 512), nn.NewReLU(),
		nn.NewLinear(rng, 512, 512), nn.NewReLU(),
		nn.NewLinear(rng, 512, classes))
	return trainer.Job{
		Name:    "mlp",
		Dataset: ds,
		Model:   model,
		NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(params, optim.SGDConfig{LR: 0.01})
		},
		Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
			return autograd.CrossEntropy(out, b.Labels, autograd.ReductionMean)
		},
	}, nil
}
