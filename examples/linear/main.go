// Command linear is the PyTorch DDP tutorial's training script in Go: a
// Linear(20, 1) trained with SGD (lr 1e-3) on TrainDataset(2048) of
// rand(20) -> rand(1), batch 32 per rank, fed by a DataLoader with a
// DistributedSampler, checkpointed from rank 0 every 5 epochs, and resumed
// from the newest checkpoint when one exists. Run it under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/linear -epochs 50
//
// Every rank prints the tutorial's line naming its device ("[cpu0] Epoch 3 | Batchsize: 32 | Steps: 32";
// ddprun --local-ranks-filter 0 shows rank 0's only)
// and finally samples_per_s=<float>, counted over all ranks after the
// first 3 steps (the warm-up). The last epoch is checkpointed too, so a
// second run in the same directory says "nothing to do" (-fresh starts over).
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

// newTrainDataset is the tutorial's TrainDataset(size): size pairs
// (rand(20), rand(1)), drawn from rng so every rank builds the same data.
func newTrainDataset(rng *tensor.RNG, size int) (*data.TensorDataset, error) {
	x := tensor.Rand(rng, tensor.Float32, size, 20)
	y := tensor.Rand(rng, tensor.Float32, size, 1)
	return data.NewTensorDataset(x, y)
}

func main() {
	os.Exit(trainer.Main(os.Args, os.Stdout,
		trainer.Defaults{Epochs: 50, BatchSize: 32, SaveEvery: 5, CkptDir: "checkpoints/linear"},
		func(rng *tensor.RNG) (trainer.Job, error) {
			ds, err := newTrainDataset(rng, 2048)
			if err != nil {
				return trainer.Job{}, err
			}
			return trainer.Job{
				Name:    "linear",
				Dataset: ds,
				Model:   nn.NewLinear(rng, 20, 1),
				NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
					return optim.NewSGD(params, optim.SGDConfig{LR: 1e-3})
				},
				Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
					return autograd.MSELoss(out, autograd.Const(b.Targets), autograd.ReductionMean)
				},
			}, nil
		}))
}
