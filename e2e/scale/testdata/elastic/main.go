// Command elastic trains a small linear regression for one epoch of a
// DistributedSampler in lockstep, as a data-parallel job does, and logs
// every index it takes and the loss after every step, so that a test can
// kill it mid-epoch at one world size, restart it at another and check
// that the epoch saw each sample exactly once and that training went on
// where it stopped.
//
// The data are -n samples of -dim features, y = x.w + noise, the same on
// every rank (seeded); the model is a Linear(dim, 1) wrapped in DDP and
// trained with SGD at -lr times the world size, the linear scaling rule:
// DDP averages the gradients over the ranks, so a step at world W covers
// W batches, and scaling the rate keeps the progress per sample, and so
// the loss as a function of the samples seen, alike at any world size.
// Each rank's loss is the squared error summed over its batch divided by
// -batch, so a short last batch weighs by its size.
//
// Each step every rank takes its next batch, trains on it, all-reduces its
// count (the samples the step saw together), and logs "step=S idx=i,j,...
// seen=N loss=L" to -log/rank<R>.world<W>: N the epoch's samples seen so
// far, L the mean squared error over the whole dataset after the step.
// Then rank 0 saves the model and the sampler's state to -state (one
// checkpoint file, written atomically). A run finding a state resumes from
// it, the sampler with LoadStateElastic. With -hold-after K rank 0 stops
// after saving step K and waits to be killed; with -fresh-model a resumed
// run ignores the saved model (a broken resume, for the test to reject).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

type sized int

func (s sized) Len() int { return int(s) }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "elastic: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 1000, "dataset length")
	dim := flag.Int("dim", 16, "features per sample")
	batch := flag.Int("batch", 8, "batch size per rank")
	lr := flag.Float64("lr", 0.01, "learning rate per rank (times the world size)")
	epoch := flag.Int("epoch", 3, "the epoch")
	statePath := flag.String("state", "", "checkpoint file (model and sampler)")
	logDir := flag.String("log", "", "directory of the index and loss logs")
	holdAfter := flag.Int("hold-after", 0, "rank 0 waits to be killed after saving this many steps (0: never)")
	freshModel := flag.Bool("fresh-model", false, "on resume, keep the freshly built model instead of the saved one")
	flag.Parse()
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	r, w := pg.Rank(), pg.Size()
	fmt.Printf("rank=%d pid=%d world=%d\n", r, os.Getpid(), w)

	x, y := dataset(*n, *dim)
	model := nn.NewLinear(tensor.NewRNG(2), *dim, 1)
	s, err := data.NewDistributedSampler(sized(*n), data.SamplerGroup(pg), data.SamplerSeed(1))
	if err != nil {
		return err
	}
	seen := 0 // samples of the epoch seen by the ranks together
	switch c, err := checkpoint.Load(*statePath); {
	case err == nil:
		if c.Sampler == nil {
			return fmt.Errorf("checkpoint %s holds no sampler state", *statePath)
		}
		if err := s.LoadStateElastic(*c.Sampler); err != nil {
			return fmt.Errorf("resuming the sampler from %s: %w", *statePath, err)
		}
		if !*freshModel {
			if err := checkpoint.LoadStateDict(model, c.Model, true); err != nil {
				return fmt.Errorf("resuming the model from %s: %w", *statePath, err)
			}
		}
		seen = c.Sampler.Consumed()
		fmt.Printf("rank=%d resumed from %+v\n", r, *c.Sampler)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	d, err := ddp.Wrap(ctx, model, pg)
	if err != nil {
		return err
	}
	defer d.Close()
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: *lr * float64(w)})
	if err != nil {
		return err
	}

	s.SetEpoch(*epoch)
	log, err := os.OpenFile(filepath.Join(*logDir, fmt.Sprintf("rank%d.world%d", r, w)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	idx := s.Indices()
	// The ranks' lists may differ by one after a re-shard: they agree on
	// the number of steps (the longest), as ddp's join does.
	left := []int64{int64(len(idx) - s.Position())}
	if err := pg.AllReduce(comm.Int64s(left), comm.Max).Wait(ctx); err != nil {
		return err
	}
	steps := (int(left[0]) + *batch - 1) / *batch
	for step := range steps {
		pos := s.Position()
		b := idx[min(pos, len(idx)):min(pos+*batch, len(idx))]
		if err := train(d, opt, x, y, b, *batch); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		count := []int64{int64(len(b))}
		if err := pg.AllReduce(comm.Int64s(count), comm.Sum).Wait(ctx); err != nil {
			return err
		}
		seen += int(count[0])
		strs := make([]string, len(b))
		for i, v := range b {
			strs[i] = strconv.Itoa(v)
		}
		fmt.Fprintf(log, "step=%d idx=%s seen=%d loss=%.9g\n", step, strings.Join(strs, ","), seen, loss(model, x, y))
		s.SetPosition(pos + len(b))
		if r == 0 {
			c := &checkpoint.Checkpoint{Epoch: *epoch, Step: step, Model: checkpoint.StateDict(model), Sampler: new(data.SamplerState)}
			*c.Sampler = s.State()
			if err := checkpoint.Save(*statePath, c); err != nil {
				return err
			}
			if *holdAfter > 0 && step+1 == *holdAfter {
				fmt.Printf("holding after step %d\n", step)
				time.Sleep(2 * time.Minute) // the test kills the job long before
				return fmt.Errorf("rank 0 was not killed")
			}
		}
	}
	fmt.Printf("rank=%d done\n", r)
	return nil
}

// dataset is n samples of y = x.w + 0.1 noise, x and w standard normal,
// the same on every rank.
func dataset(n, dim int) (x, y *tensor.Tensor) {
	rng := tensor.NewRNG(1)
	x = tensor.Randn(rng, tensor.Float32, n, dim)
	wt := tensor.Randn(rng, tensor.Float32, dim)
	noise := tensor.Randn(rng, tensor.Float32, n)
	ys := make([]float32, n)
	xs, ws, es := x.F32(), wt.F32(), noise.F32()
	for i := range ys {
		var dot float32
		for j := range dim {
			dot += xs[i*dim+j] * ws[j]
		}
		ys[i] = dot + 0.1*es[i]
	}
	return x, tensor.FromF32(ys, n, 1)
}

// train runs one DDP step on the samples b. A rank whose list ran out
// (they may differ by one after a re-shard) still joins the gradient
// all-reduce, with one zero row weighted 0.
func train(d *ddp.DDP, opt optim.Optimizer, x, y *tensor.Tensor, b []int, batch int) error {
	dim := x.Size(1)
	rows := max(len(b), 1)
	xb, yb := make([]float32, rows*dim), make([]float32, rows)
	xs, ys := x.F32(), y.F32()
	for i, k := range b {
		copy(xb[i*dim:(i+1)*dim], xs[k*dim:(k+1)*dim])
		yb[i] = ys[k]
	}
	opt.ZeroGrad()
	out, err := d.Forward(autograd.Const(tensor.FromF32(xb, rows, dim)))
	if err != nil {
		return err
	}
	sq := autograd.MSELoss(out, autograd.Const(tensor.FromF32(yb, rows, 1)), autograd.ReductionSum)
	l := autograd.Mul(sq, autograd.Const(tensor.Scalar(tensor.Float32, float64(len(b))/float64(rows)/float64(batch))))
	if err := l.Backward(); err != nil {
		return err
	}
	return opt.Step()
}

// loss is the mean squared error of m over the whole dataset.
func loss(m *nn.Linear, x, y *tensor.Tensor) float64 {
	var l float64
	nn.NoGrad(m, func() {
		l = autograd.MSELoss(m.Forward(autograd.Const(x)), autograd.Const(y), autograd.ReductionMean).Value.Item()
	})
	return l
}
