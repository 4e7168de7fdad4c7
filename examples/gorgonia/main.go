//go:build !cuda

// Command gorgonia trains a gorgonia.org/gorgonia ExprGraph under goddp's
// DDP: a two-layer MLP regression (relu(x·W1 + b1)·W2 + b2, mean squared
// error) built and differentiated by gorgonia's TapeMachine, whose
// gradients go through DDP's Reducer and buckets (package
// ddp/gorgoniaddp). Every rank builds the same data, shuffles it with the
// same seed each epoch and trains on its own slice of each global batch.
// Run it under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/gorgonia -epochs 20
//
// Rank 0 prints the mean loss over all ranks after each epoch, then
// "weights_sum=<float>" (equal on every rank) and "final_loss=<float>".
// With -solver the step is gorgonia's VanillaSolver on the averaged
// gradients instead of goddp's SGD. Two ranks with -batch 32 follow one
// process with -batch 64 (the same global batches): compare weights_sum.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"goddp/comm"
	"goddp/ddp"
	"goddp/ddp/gorgoniaddp"
	"goddp/optim"
	"goddp/tensor"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gorgonia:", err)
		os.Exit(1)
	}
}

type config struct {
	epochs, batch, hidden, samples int
	lr                             float64
	seed                           uint64
	solver                         bool
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("gorgonia", flag.ContinueOnError)
	fs.IntVar(&c.epochs, "epochs", 20, "passes over the data")
	fs.IntVar(&c.batch, "batch", 32, "batch size per rank")
	fs.IntVar(&c.hidden, "hidden", 32, "hidden units")
	fs.IntVar(&c.samples, "samples", 1024, "training samples")
	fs.Float64Var(&c.lr, "lr", 0.05, "learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed for data and initial weights (same on every rank)")
	fs.BoolVar(&c.solver, "solver", false, "step with gorgonia's VanillaSolver instead of goddp's SGD")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.epochs < 1 || c.batch < 1 || c.hidden < 1 || c.samples < 1 || c.lr <= 0 {
		return c, errors.New("epochs, batch, hidden, samples and lr must be positive")
	}
	return c, nil
}

const nIn, nOut = 8, 2

// net is the gorgonia graph for one rank's batch.
type net struct {
	x, y, cost *G.Node
	learnables G.Nodes
}

func dense(t *tensor.Tensor) *gt.Dense {
	return gt.New(gt.WithShape(t.Shape()...), gt.WithBacking(append([]float32(nil), t.F32()...)))
}

func buildNet(rng *tensor.RNG, batch, hidden int) *net {
	g := G.NewGraph()
	n := &net{}
	n.x = G.NewMatrix(g, gt.Float32, G.WithShape(batch, nIn), G.WithName("x"), G.WithValue(gt.New(gt.Of(gt.Float32), gt.WithShape(batch, nIn))))
	n.y = G.NewMatrix(g, gt.Float32, G.WithShape(batch, nOut), G.WithName("y"), G.WithValue(gt.New(gt.Of(gt.Float32), gt.WithShape(batch, nOut))))
	// torch's Linear init scale, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
	u := func(fanIn int, shape ...int) *gt.Dense {
		b := 1 / math.Sqrt(float64(fanIn))
		return dense(rng.Uniform(tensor.Float32, -b, b, shape...))
	}
	w1 := G.NewMatrix(g, gt.Float32, G.WithShape(nIn, hidden), G.WithName("w1"), G.WithValue(u(nIn, nIn, hidden)))
	b1 := G.NewVector(g, gt.Float32, G.WithShape(hidden), G.WithName("b1"), G.WithValue(u(nIn, hidden)))
	w2 := G.NewMatrix(g, gt.Float32, G.WithShape(hidden, nOut), G.WithName("w2"), G.WithValue(u(hidden, hidden, nOut)))
	b2 := G.NewVector(g, gt.Float32, G.WithShape(nOut), G.WithName("b2"), G.WithValue(u(hidden, nOut)))
	h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(n.x, w1)), b1, nil, []byte{0}))))
	pred := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w2)), b2, nil, []byte{0}))
	n.cost = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, n.y))))))
	n.learnables = G.Nodes{w1, b1, w2, b2}
	return n
}

// makeData draws inputs and a smooth nonlinear target, the same on every rank.
func makeData(rng *tensor.RNG, n int) (x, y *tensor.Tensor) {
	x = tensor.Randn(rng, tensor.Float32, n, nIn)
	teacher := tensor.Randn(rng, tensor.Float32, nIn, nOut)
	y = tensor.Tanh(tensor.MatMul(x, teacher))
	return x, y
}

func run(args []string, stdout io.Writer) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	rank, world := pg.Rank(), pg.Size()

	rng := tensor.NewRNG(cfg.seed)
	xs, ys := makeData(rng, cfg.samples)
	nt := buildNet(rng, cfg.batch, cfg.hidden)
	model, err := gorgoniaddp.New(nt.cost, nt.learnables)
	if err != nil {
		return err
	}
	defer model.Close()
	d, err := ddp.Wrap(ctx, model, pg)
	if err != nil {
		return err
	}
	defer d.Close()
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: cfg.lr})
	if err != nil {
		return err
	}
	solver := G.NewVanillaSolver(G.WithLearnRate(cfg.lr))

	global := cfg.batch * world
	steps := cfg.samples / global
	if steps == 0 {
		return fmt.Errorf("%d samples are fewer than one global batch (%d ranks x %d)", cfg.samples, world, cfg.batch)
	}
	start := time.Now()
	var last float64
	for epoch := range cfg.epochs {
		perm := rng.Perm(cfg.samples) // same draw on every rank
		var sum float64
		for s := range steps {
			idx := perm[s*global+rank*cfg.batch : s*global+(rank+1)*cfg.batch]
			if err := G.Let(nt.x, dense(tensor.IndexSelect(xs, 0, idx))); err != nil {
				return err
			}
			if err := G.Let(nt.y, dense(tensor.IndexSelect(ys, 0, idx))); err != nil {
				return err
			}
			opt.ZeroGrad()
			loss, err := gorgoniaddp.Step(d, model)
			if err != nil {
				return fmt.Errorf("epoch %d step %d: %w", epoch, s, err)
			}
			if cfg.solver {
				if err := model.CopyGradsToGraph(); err != nil {
					return err
				}
				if err := solver.Step(G.NodesToValueGrads(nt.learnables)); err != nil {
					return err
				}
			} else if err := opt.Step(); err != nil {
				return err
			}
			sum += loss
		}
		mean := []float64{sum / float64(steps)}
		if err := pg.AllReduce(comm.Float64s(mean), comm.Avg).Wait(ctx); err != nil {
			return err
		}
		last = mean[0]
		if rank == 0 {
			fmt.Fprintf(stdout, "epoch %d | loss %.6f\n", epoch, last)
		}
	}
	var wsum float64
	for _, p := range d.Parameters() {
		wsum += tensor.SumAll(p.Value)
	}
	if rank == 0 {
		fmt.Fprintf(stdout, "ranks=%d elapsed=%.2fs\nweights_sum=%.6f\nfinal_loss=%.6f\n", world, time.Since(start).Seconds(), wsum, last)
	}
	return pg.Barrier().Wait(ctx)
}
