package zero_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/optim/zero"
	"github.com/goddp/goddp/tensor"
)

// Two ranks (goroutines here; processes under ddprun) share AdamW's state:
// each keeps the moments of half the parameters, and every rank ends the
// step with the same parameters.
func ExampleNewAdamW() {
	pgs := commtest.NewGroups(2)
	finals := make([][]float32, 2)
	bytes := make([]int, 2)
	commtest.Run(pgs, func(pg backend.ProcessGroup) error {
		w := autograd.Param(tensor.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
		opt, err := zero.NewAdamW(pg, []*autograd.Variable{w}, optim.DefaultAdamW(), zero.Config{ReduceGrads: true})
		if err != nil {
			return err
		}
		// Each rank's own gradient; Step averages them.
		w.Grad = tensor.FromF32([]float32{1, 1, 1, float32(pg.Rank()), 1, 1}, 2, 3)
		if err := opt.Step(); err != nil {
			return err
		}
		finals[pg.Rank()], bytes[pg.Rank()] = w.Value.F32(), opt.StateBytes()
		return opt.ConsolidateStateDict(context.Background(), 0)
	})
	fmt.Printf("%.4f\n%.4f\n", finals[0], finals[1])
	fmt.Println("state bytes per rank:", bytes, "of", 2*6*4)
	// Output:
	// [0.9990 1.9990 2.9990 3.9990 4.9990 5.9989]
	// [0.9990 1.9990 2.9990 3.9990 4.9990 5.9989]
	// state bytes per rank: [24 24] of 48
}
