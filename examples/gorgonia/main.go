//go:build !cuda

// Command gorgonia trains a gorgonia.org/gorgonia ExprGraph under goddp's
// DDP: a two-layer MLP regression (relu(x·W1 + b1)·W2 + b2, mean squared
// error) built and differentiated by gorgonia's TapeMachine, whose
// gradients go through DDP's Reducer and buckets (package
// ddp/gorgoniaddp). Every rank builds the same data, shuffles it with the
// same seed each epoch (a DistributedSampler) and trains on its own share
// of each global batch.
// Run it under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/gorgonia -epochs 20
//
// It runs on package trainer (trainer.Main): the graph's step is the
// Trainer's Step, so the common flags (-metrics, -dashboard, -ckpt-dir,
// ...) work here too. Rank 0 prints the mean loss over all ranks after each
// epoch, then "weights_sum=<float>" (equal on every rank) and
// "final_loss=<float>".
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
	"strconv"
	"time"

	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/ddp/gorgoniaddp"
	_ "github.com/goddp/goddp/devices" // registers cuda and sim: -device cuda, sim, sim:N
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gorgonia:", err)
		os.Exit(1)
	}
}

type config struct {
	batch, hidden, samples int
	lr                     float64
	solver                 bool
}

// flags defines the example's own flags on trainer.Main's flag set, which
// has -epochs (default 20 here), -seed (default 1) and the common ones.
func (c *config) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.batch, "batch", 32, "batch size per rank")
	fs.IntVar(&c.hidden, "hidden", 32, "hidden units")
	fs.IntVar(&c.samples, "samples", 1024, "training samples")
	fs.Float64Var(&c.lr, "lr", 0.05, "learning rate")
	fs.BoolVar(&c.solver, "solver", false, "step with gorgonia's VanillaSolver instead of goddp's SGD")
}

func (c *config) validate() error {
	if c.batch < 1 || c.hidden < 1 || c.samples < 1 || c.lr <= 0 {
		return errors.New("batch, hidden, samples and lr must be positive")
	}
	return nil
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
	var (
		cfg   config
		nt    *net
		model *gorgoniaddp.Model
		rep   = &report{out: stdout}
		start = time.Now()
	)
	defaults := trainer.Defaults{Epochs: 20, BatchSize: 32, Seed: 1, Flags: cfg.flags}
	build := func(rng *tensor.RNG) (trainer.Job, error) {
		if err := cfg.validate(); err != nil {
			return trainer.Job{}, err
		}
		// A graph's batch is fixed, so each epoch drops the last partial
		// global batch; a run with none would train nothing.
		if world := envInt("WORLD_SIZE", 1); cfg.samples < cfg.batch*world {
			return trainer.Job{}, fmt.Errorf("%d samples are fewer than one global batch (%d ranks x %d)", cfg.samples, world, cfg.batch)
		}
		xs, ys := makeData(rng, cfg.samples)
		ds, err := data.NewTensorDataset(xs, ys)
		if err != nil {
			return trainer.Job{}, err
		}
		nt = buildNet(rng, cfg.batch, cfg.hidden)
		if model, err = gorgoniaddp.New(nt.cost, nt.learnables); err != nil {
			return trainer.Job{}, err
		}
		return trainer.Job{
			Name: "gorgonia", Dataset: ds, Model: model, BatchSize: cfg.batch,
			DropLast: true, // the graph is built for cfg.batch rows
			NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
				return optim.NewSGD(params, optim.SGDConfig{LR: cfg.lr})
			},
			NewStep:   func(d *ddp.DDP, opt optim.Optimizer) trainer.StepFunc { return newStep(d, model, nt, opt, cfg) },
			Callbacks: []trainer.Callback{rep},
		}, nil
	}
	code := trainer.Main(append([]string{"gorgonia"}, args...), stdout, defaults, build)
	if model != nil {
		defer model.Close()
	}
	if code != 0 {
		return fmt.Errorf("exit status %d", code)
	}
	if rep.epochs > 0 && rep.rank == 0 {
		var wsum float64
		for _, p := range model.NamedParameters() {
			wsum += tensor.SumAll(p.Param.Value)
		}
		fmt.Fprintf(stdout, "ranks=%d elapsed=%.2fs\nweights_sum=%.6f\nfinal_loss=%.6f\n", rep.world, time.Since(start).Seconds(), wsum, rep.last)
	}
	return nil
}

// newStep is the Trainer's step: bind the batch to the graph, run it
// forward and backward under DDP (gorgoniaddp.Step), then step with
// goddp's optimizer or gorgonia's solver on the averaged gradients.
func newStep(d *ddp.DDP, model *gorgoniaddp.Model, nt *net, opt optim.Optimizer, cfg config) trainer.StepFunc {
	solver := G.NewVanillaSolver(G.WithLearnRate(cfg.lr))
	return func(_ context.Context, b data.Batch) (float64, error) {
		if err := G.Let(nt.x, dense(b.Inputs)); err != nil {
			return 0, err
		}
		if err := G.Let(nt.y, dense(b.Targets)); err != nil {
			return 0, err
		}
		opt.ZeroGrad()
		loss, err := gorgoniaddp.Step(d, model)
		if err != nil {
			return 0, err
		}
		if !cfg.solver {
			return loss, opt.Step()
		}
		if err := model.CopyGradsToGraph(); err != nil {
			return 0, err
		}
		return loss, solver.Step(G.NodesToValueGrads(nt.learnables))
	}
}

// report prints the mean loss over all ranks after each epoch on rank 0,
// and keeps the last for run's final lines.
type report struct {
	out         io.Writer
	epochs      int // epochs run
	rank, world int
	last        float64
}

func (r *report) OnEpochEnd(ctx context.Context, t *trainer.Trainer, e trainer.EpochInfo) error {
	pg := t.Model().ProcessGroup()
	mean := []float64{e.Loss}
	if err := pg.AllReduce(comm.Float64s(mean), comm.Avg).Wait(ctx); err != nil {
		return err
	}
	r.last, r.epochs, r.rank, r.world = mean[0], r.epochs+1, pg.Rank(), pg.Size()
	if r.rank == 0 {
		fmt.Fprintf(r.out, "epoch %d | loss %.6f\n", e.Epoch, r.last)
	}
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
