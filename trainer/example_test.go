package trainer_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

// A Trainer built from parts: one process here (no launcher variables), a
// rank of the job under ddprun. The callback prints each epoch's end.
func Example() {
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Close()

	rng := tensor.NewRNG(0)
	ds, err := data.NewTensorDataset(tensor.Rand(rng, tensor.Float32, 256, 8), tensor.Rand(rng, tensor.Float32, 256, 1))
	if err != nil {
		log.Fatal(err)
	}
	sampler, err := data.NewDistributedSampler(ds, data.SamplerGroup(pg))
	if err != nil {
		log.Fatal(err)
	}
	loader, err := data.NewDataLoader(ds, data.BatchSize(32), data.WithSampler(sampler))
	if err != nil {
		log.Fatal(err)
	}
	model, err := ddp.Wrap(ctx, nn.NewLinear(rng, 8, 1), pg)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.05})
	if err != nil {
		log.Fatal(err)
	}
	var first, last float64
	t, err := trainer.New(ctx, trainer.Config{Model: model, TrainData: loader, Sampler: sampler, Optimizer: opt, BatchSize: 32,
		Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
			return autograd.MSELoss(out, autograd.Const(b.Targets), autograd.ReductionMean)
		},
		Out: io.Discard, // the log lines
		Callbacks: []trainer.Callback{trainer.Funcs{
			EpochEnd: func(_ context.Context, _ *trainer.Trainer, e trainer.EpochInfo) error {
				if e.Epoch == 0 {
					first = e.Loss
				}
				last = e.Loss
				fmt.Printf("epoch %d: %d steps\n", e.Epoch, e.Step)
				return nil
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if err := t.Train(ctx, 3); err != nil {
		log.Fatal(err)
	}
	fmt.Println("loss went down:", last < first)
	// Output:
	// epoch 0: 8 steps
	// epoch 1: 16 steps
	// epoch 2: 24 steps
	// loss went down: true
}
