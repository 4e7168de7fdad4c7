package ddp_test

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"sync"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// Two ranks (goroutines over an in-memory process group; a real job gets its
// group from comm.InitFromEnv) train the same model on different data. After
// each Backward the gradients are averaged, so the replicas stay identical.
func Example() {
	pgs := commtest.NewGroups(2)
	weights := make([][]float32, 2)
	var wg sync.WaitGroup
	for rank := range pgs {
		wg.Add(1)
		go func(pg comm.ProcessGroup) {
			defer wg.Done()
			// Each rank may initialise differently: Wrap broadcasts rank 0's.
			rng := tensor.NewRNG(uint64(pg.Rank()))
			model := nn.NewSequential(nn.NewLinear(rng, 4, 8), nn.NewReLU(), nn.NewLinear(rng, 8, 1))
			d, err := ddp.Wrap(context.Background(), model, pg)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer d.Close()
			opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
			if err != nil {
				fmt.Println(err)
				return
			}
			data := tensor.NewRNG(uint64(100 + pg.Rank())) // this rank's shard
			for step := 0; step < 5; step++ {
				x := autograd.Const(tensor.Randn(data, tensor.Float32, 16, 4))
				y := autograd.Const(tensor.Randn(data, tensor.Float32, 16, 1))
				opt.ZeroGrad()
				out, err := d.Forward(x)
				if err != nil {
					fmt.Println(err)
					return
				}
				// Backward returns once the gradients are averaged across ranks.
				if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
					fmt.Println(err)
					return
				}
				if err := opt.Step(); err != nil {
					fmt.Println(err)
					return
				}
			}
			weights[pg.Rank()] = append([]float32(nil), d.Parameters()[0].Value.F32()...)
		}(pgs[rank])
	}
	wg.Wait()
	same := len(weights[0]) > 0
	for i := range weights[0] {
		same = same && weights[0][i] == weights[1][i]
	}
	fmt.Println("replicas identical:", same)
	// Output: replicas identical: true
}

// Gradient accumulation: the first micro-batches only accumulate locally;
// the last one's backward averages the accumulated gradients.
func ExampleDDP_NoSync() {
	pg := commtest.NewGroups(1)[0]
	model := nn.NewLinear(tensor.NewRNG(0), 3, 1)
	d, err := ddp.Wrap(context.Background(), model, pg)
	if err != nil {
		fmt.Println(err)
		return
	}
	rng := tensor.NewRNG(1)
	microStep := func() error {
		out, err := d.Forward(autograd.Const(tensor.Randn(rng, tensor.Float32, 4, 3)))
		if err != nil {
			return err
		}
		return autograd.MSELoss(out, autograd.Const(tensor.New(tensor.Float32, 4, 1)), autograd.ReductionMean).Backward()
	}
	for m := 0; m < 3; m++ {
		if err := d.NoSync(microStep); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := microStep(); err != nil { // synchronised
		fmt.Println(err)
		return
	}
	fmt.Println("synchronised iterations:", d.Stats().Iterations)
	// Output: synchronised iterations: 1
}

// Uneven inputs: rank 1 has more batches than rank 0. Under Join, rank 0
// answers rank 1's collectives after its own data ends instead of hanging.
func ExampleDDP_Join() {
	pgs := commtest.NewGroups(2)
	batches := []int{2, 5}
	var wg sync.WaitGroup
	for _, pg := range pgs {
		wg.Add(1)
		go func(pg comm.ProcessGroup) {
			defer wg.Done()
			model := nn.NewLinear(tensor.NewRNG(0), 3, 1)
			d, err := ddp.Wrap(context.Background(), model, pg)
			if err != nil {
				fmt.Println(err)
				return
			}
			opt, _ := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
			rng := tensor.NewRNG(uint64(pg.Rank()))
			err = d.Join(context.Background(), func() error {
				for i := 0; i < batches[pg.Rank()]; i++ {
					opt.ZeroGrad()
					out, err := d.Forward(autograd.Const(tensor.Randn(rng, tensor.Float32, 4, 3)))
					if err != nil {
						return err
					}
					if err := autograd.SumAll(out).Backward(); err != nil {
						return err
					}
					if err := opt.Step(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				fmt.Println(err)
			}
		}(pg)
	}
	wg.Wait()
	fmt.Println("all ranks done")
	// Output: all ranks done
}
