//go:build !cuda

package gorgoniaddp_test

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"

	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/ddp/gorgoniaddp"
	"github.com/goddp/goddp/optim"
)

// Fit y = 2x + 1 with a gorgonia graph under DDP (one rank here; under a
// launcher, pg comes from comm.InitFromEnv and each rank binds its shard).
func Example() {
	g := G.NewGraph()
	x := G.NewVector(g, gt.Float64, G.WithShape(4), G.WithName("x"),
		G.WithValue(gt.New(gt.WithBacking([]float64{0, 1, 2, 3}))))
	y := G.NewVector(g, gt.Float64, G.WithShape(4), G.WithName("y"),
		G.WithValue(gt.New(gt.WithBacking([]float64{1, 3, 5, 7}))))
	m := G.NewScalar(g, gt.Float64, G.WithName("m"), G.WithValue(0.0))
	c := G.NewScalar(g, gt.Float64, G.WithName("c"), G.WithValue(0.0))
	pred := G.Must(G.Add(G.Must(G.Mul(x, m)), c))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, y))))))

	model, err := gorgoniaddp.New(cost, G.Nodes{m, c})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer model.Close()
	pg := commtest.NewGroups(1)[0]
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
	for range 500 {
		opt.ZeroGrad()
		if _, err := gorgoniaddp.Step(d, model); err != nil {
			fmt.Println(err)
			return
		}
		if err := opt.Step(); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Printf("y = %.3fx + %.3f\n", m.Value(), c.Value())
	// Output: y = 2.000x + 1.000
}
