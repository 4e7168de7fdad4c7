//go:build !cuda

package gorgoniaddp_test

import (
	"context"
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/ddp/gorgoniaddp"
	"github.com/goddp/goddp/optim"
)

// trainRank trains this rank's shard under DDP for steps steps and returns
// the weights after each. With useSolver the step is gorgonia's
// VanillaSolver on the averaged gradients (CopyGradsToGraph); otherwise
// goddp's SGD on d.Parameters().
func trainRank(pg comm.ProcessGroup, useSolver bool) ([][][]float32, error) {
	m, model, err := newModel(pg.Rank(), pg.Size())
	if err != nil {
		return nil, err
	}
	defer model.Close()
	d, err := ddp.Wrap(context.Background(), model, pg)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: lr})
	if err != nil {
		return nil, err
	}
	solver := G.NewVanillaSolver(G.WithLearnRate(lr))
	var hist [][][]float32
	for s := range steps {
		opt.ZeroGrad()
		if _, err := gorgoniaddp.Step(d, model); err != nil {
			return nil, fmt.Errorf("rank %d step %d: %w", pg.Rank(), s, err)
		}
		if useSolver {
			if err := model.CopyGradsToGraph(); err != nil {
				return nil, err
			}
			if err := solver.Step(G.NodesToValueGrads(m.learnables)); err != nil {
				return nil, err
			}
		} else if err := opt.Step(); err != nil {
			return nil, err
		}
		hist = append(hist, weights(m.learnables))
	}
	return hist, nil
}

// closeTo reports the first element where got and want differ by more than
// tol (absolute plus relative).
func closeTo(got, want [][][]float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d steps, want %d", len(got), len(want))
	}
	for s := range want {
		for p := range want[s] {
			for i, w := range want[s][p] {
				g := got[s][p][i]
				diff := float64(g - w)
				if diff < 0 {
					diff = -diff
				}
				if diff > tol*(1+abs(float64(w))) {
					return fmt.Errorf("step %d, learnable %d, element %d: %v, want %v", s, p, i, g, w)
				}
			}
		}
	}
	return nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
