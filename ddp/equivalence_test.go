package ddp

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// equivCase is one "N ranks with batch B == one process with batch N*B"
// scenario. It is shared by the in-memory test and the multi-process test.
type equivCase struct {
	Name   string
	Optim  string // "sgd", "sgd-momentum" or "adam"
	Steps  int
	Batch  int // per rank and micro-step
	Accum  int // micro-steps per optimizer step (NoSync on all but the last)
	Unused bool
	View   bool
	Hook   string // "", "fp16", "bf16"
	Tol    float64
}

var equivCases = []equivCase{
	{Name: "sgd", Optim: "sgd", Steps: 4, Batch: 4, Accum: 1, Tol: 2e-5},
	{Name: "sgd-momentum bucket-view", Optim: "sgd-momentum", Steps: 4, Batch: 3, Accum: 1, View: true, Tol: 2e-5},
	{Name: "adam", Optim: "adam", Steps: 4, Batch: 4, Accum: 1, Tol: 1e-4},
	{Name: "nosync accumulation", Optim: "sgd", Steps: 3, Batch: 2, Accum: 3, Tol: 2e-5},
	{Name: "nosync accumulation adam bucket-view", Optim: "adam", Steps: 3, Batch: 2, Accum: 2, View: true, Tol: 1e-4},
	{Name: "unused parameters", Optim: "adam", Steps: 3, Batch: 4, Accum: 1, Unused: true, Tol: 1e-4},
	{Name: "fp16 hook", Optim: "sgd", Steps: 3, Batch: 4, Accum: 1, Hook: "fp16", Tol: 3e-3},
}

const (
	eqIn, eqHidden, eqClasses = 6, 16, 4
)

// equivNet: Linear-ReLU-Linear classifier, plus an "aux" head that only
// takes part in the loss when Unused is off.
func equivNet(tc equivCase, seed uint64) *testNet {
	n := mlpNet([]int{eqIn, eqHidden, eqClasses}, seed)
	rng := tensor.NewRNG(seed + 99)
	n.add("aux.weight", rng.Uniform(tensor.Float32, -0.3, 0.3, 1, eqHidden))
	n.fwd = func(n *testNet, x *autograd.Variable) *autograd.Variable {
		h := autograd.ReLU(autograd.Linear(x, n.params[0], n.params[1]))
		return autograd.Linear(h, n.params[2], n.params[3])
	}
	return n
}

// globalBatch is the whole step's data: world*Batch*Accum rows.
func globalBatch(tc equivCase, world, step int) (*tensor.Tensor, []int) {
	rows := world * tc.Batch * tc.Accum
	rng := tensor.NewRNG(uint64(7919*step + 13))
	x := rng.Uniform(tensor.Float32, -1, 1, rows, eqIn)
	y := make([]int, rows)
	for i := range y {
		y[i] = int(rng.Float64() * eqClasses)
	}
	return x, y
}

func rowsOf(x *tensor.Tensor, y []int, from, n int) (*autograd.Variable, []int) {
	d := x.F32()[from*eqIn : (from+n)*eqIn]
	return autograd.Const(tensor.FromF32(append([]float32(nil), d...), n, eqIn)), y[from : from+n]
}

func newOptimizer(kind string, ps []*autograd.Variable) (optim.Optimizer, error) {
	switch kind {
	case "sgd":
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05})
	case "sgd-momentum":
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	case "adam":
		c := optim.DefaultAdam()
		c.LR = 0.01
		return optim.NewAdam(ps, c)
	}
	return nil, fmt.Errorf("unknown optimizer %q", kind)
}

// lossOn is the mean cross-entropy of a micro-batch, scaled for accumulation.
func lossOn(out *autograd.Variable, y []int, accum int) *autograd.Variable {
	l := autograd.CrossEntropy(out, y, autograd.ReductionMean)
	if accum == 1 {
		return l
	}
	return scaleVar(l, 1/float32(accum))
}

// referenceTrain trains one process on the concatenated batches.
func referenceTrain(tc equivCase, world int) ([][]float32, error) {
	net := equivNet(tc, 1)
	opt, err := newOptimizer(tc.Optim, net.params)
	if err != nil {
		return nil, err
	}
	for step := 0; step < tc.Steps; step++ {
		x, y := globalBatch(tc, world, step)
		opt.ZeroGrad()
		loss := autograd.CrossEntropy(net.Forward(autograd.Const(x)), y, autograd.ReductionMean)
		if !tc.Unused {
			loss = addAll(loss, dotAux(net))
		}
		if err := loss.Backward(); err != nil {
			return nil, err
		}
		if err := opt.Step(); err != nil {
			return nil, err
		}
	}
	return paramsOf(net), nil
}

// dotAux is a tiny term on the aux head so that, when used, it has a gradient.
func dotAux(n *testNet) *autograd.Variable {
	return dot(n.p("aux.weight"), constant(0.01, 1, eqHidden))
}

// ddpTrain is one rank's side of the scenario.
func ddpTrain(tc equivCase, pg comm.ProcessGroup) ([][]float32, error) {
	world, rank := pg.Size(), pg.Rank()
	net := equivNet(tc, uint64(1+rank)) // different inits: Wrap must broadcast rank 0's
	var opts []Option
	if tc.Unused {
		opts = append(opts, FindUnusedParameters(true))
	}
	if tc.View {
		opts = append(opts, GradientAsBucketView(true))
	}
	switch tc.Hook {
	case "fp16":
		opts = append(opts, WithCommHook(FP16CompressHook()))
	case "bf16":
		opts = append(opts, WithCommHook(BF16CompressHook()))
	}
	d, err := Wrap(context.Background(), net, pg, opts...)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	opt, err := newOptimizer(tc.Optim, d.Parameters())
	if err != nil {
		return nil, err
	}
	micro := func(x *autograd.Variable, y []int) error {
		out, err := d.ForwardFunc(func() *autograd.Variable {
			o := net.Forward(x)
			if !tc.Unused {
				// The aux term is part of the output graph: the scaled
				// copy keeps its gradient equal to the reference's.
				o = withAux(o, scaleVar(dotAux(net), 1/float32(tc.Accum)))
			}
			return o
		})
		if err != nil {
			return err
		}
		return lossOn(out, y, tc.Accum).Backward()
	}
	for step := 0; step < tc.Steps; step++ {
		x, y := globalBatch(tc, world, step)
		opt.ZeroGrad()
		for m := 0; m < tc.Accum; m++ {
			xs, ys := rowsOf(x, y, (m*world+rank)*tc.Batch, tc.Batch)
			if m < tc.Accum-1 {
				if err := d.NoSync(func() error { return micro(xs, ys) }); err != nil {
					return nil, err
				}
				continue
			}
			if err := micro(xs, ys); err != nil {
				return nil, err
			}
		}
		if err := opt.Step(); err != nil {
			return nil, err
		}
	}
	return paramsOf(net), nil
}

func TestEquivalenceInMemory(t *testing.T) {
	for _, tc := range equivCases {
		for _, world := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/world%d", tc.Name, world), func(t *testing.T) {
				want, err := referenceTrain(tc, world)
				require.NoError(t, err)
				got := make([][][]float32, world)
				errs := runRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
					var err error
					got[rank], err = ddpTrain(tc, pg)
					return err
				})
				requireNoErrs(t, errs)
				for r := range got {
					requireClose(t, want, got[r], tc.Tol, fmt.Sprintf("rank %d", r))
				}
			})
		}
	}
}

// scaleOp multiplies a variable by a constant.
type scaleOp struct {
	in *autograd.Variable
	s  float32
}

func (o *scaleOp) Name() string                 { return "testScale" }
func (o *scaleOp) Inputs() []*autograd.Variable { return []*autograd.Variable{o.in} }
func (o *scaleOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	g := gy.Clone()
	for i := range g.F32() {
		g.F32()[i] *= o.s
	}
	return []*tensor.Tensor{g}
}

func scaleVar(v *autograd.Variable, s float32) *autograd.Variable {
	out := v.Value.Clone()
	for i := range out.F32() {
		out.F32()[i] *= s
	}
	return autograd.FromOp(out, &scaleOp{v, s})
}

// auxOp returns logits unchanged and adds the scalar aux's value to nothing:
// it only routes a unit gradient to aux, so aux's term joins the output graph
// (and with it the loss) without changing the logits.
type auxOp struct{ logits, aux *autograd.Variable }

func (o *auxOp) Name() string                 { return "testWithAux" }
func (o *auxOp) Inputs() []*autograd.Variable { return []*autograd.Variable{o.logits, o.aux} }
func (o *auxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{gy, tensor.FromF32([]float32{1}, o.aux.Value.Shape()...)}
}

func withAux(logits, aux *autograd.Variable) *autograd.Variable {
	return autograd.FromOp(logits.Value, &auxOp{logits, aux})
}
