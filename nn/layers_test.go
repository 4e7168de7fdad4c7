package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

type layerCase struct {
	Name    string     `json:"name"`
	Train   bool       `json:"train"`
	X       *fixTensor `json:"x"`
	Indices *fixTensor `json:"indices"`
	Out     fixTensor  `json:"out"`
	GradOut fixTensor  `json:"grad_out"`
	GradX   *fixTensor `json:"grad_x"`
	Params  []struct {
		Name  string    `json:"name"`
		Value fixTensor `json:"value"`
		Grad  fixTensor `json:"grad"`
	} `json:"params"`
	RunningMeanBefore *fixTensor `json:"running_mean_before"`
	RunningVarBefore  *fixTensor `json:"running_var_before"`
	RunningMeanAfter  *fixTensor `json:"running_mean_after"`
	RunningVarAfter   *fixTensor `json:"running_var_after"`
	NBTAfter          int        `json:"num_batches_tracked_after"`
}

// newFixtureLayer builds the layer a fixture case describes, with torch's
// shapes; the weights are then loaded through LoadStateDict.
func newFixtureLayer(t *testing.T, c layerCase) Layer {
	rng := tensor.NewRNG(1)
	switch c.Name {
	case "linear":
		return NewLinear(rng, 5, 3)
	case "linear_nobias":
		return NewLinearNoBias(rng, 6, 2)
	case "relu":
		return NewReLU()
	case "gelu":
		return NewGELU()
	case "tanh":
		return NewTanh()
	case "sigmoid":
		return NewSigmoid()
	case "layernorm":
		return NewLayerNorm(6)
	case "embedding":
		return NewEmbedding(rng, 7, 3)
	case "batchnorm1d_train", "batchnorm1d_eval":
		return NewBatchNorm1d(4)
	case "sequential":
		return NewSequential(NewLinear(rng, 4, 5), NewTanh(), NewLinear(rng, 5, 2))
	}
	t.Fatalf("no layer for fixture %q", c.Name)
	return nil
}

func TestLayersMatchTorch(t *testing.T) {
	var fx struct{ Cases []layerCase }
	loadFixture(t, "layers.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			layer := newFixtureLayer(t, c)
			sd := NewTensorDict()
			for _, p := range c.Params {
				sd.Set(p.Name, p.Value.f32())
			}
			if c.RunningMeanBefore != nil {
				sd.Set("running_mean", c.RunningMeanBefore.f32())
				sd.Set("running_var", c.RunningVarBefore.f32())
				sd.Set("num_batches_tracked", tensor.New(tensor.Float64))
			}
			require.NoError(t, LoadStateDict(layer, sd))
			layer.Train(c.Train)

			var x *autograd.Variable
			if c.Indices != nil {
				x = autograd.Const(c.Indices.f32())
			} else {
				x = autograd.Param(c.X.f32())
			}
			out := layer.Forward(x)
			requireClose(t, &c.Out, out.Value, 1e-5, 1e-5, "forward")
			if !out.RequiresGrad() {
				return
			}
			require.NoError(t, out.BackwardWith(c.GradOut.f32()))
			if c.GradX != nil {
				require.NotNil(t, x.Grad)
				requireClose(t, c.GradX, x.Grad, 1e-5, 1e-4, "grad x")
			}
			nps := layer.NamedParameters()
			require.Len(t, nps, len(c.Params))
			for i, p := range c.Params {
				require.Equal(t, p.Name, nps[i].Name)
				require.NotNil(t, nps[i].Param.Grad, p.Name)
				requireClose(t, &p.Grad, nps[i].Param.Grad, 1e-5, 1e-4, "grad "+p.Name)
			}
			if c.RunningMeanAfter != nil {
				bn := layer.(*BatchNorm1d)
				requireClose(t, c.RunningMeanAfter, bn.RunningMean, 1e-6, 1e-5, "running_mean")
				requireClose(t, c.RunningVarAfter, bn.RunningVar, 1e-6, 1e-5, "running_var")
				want := float64(c.NBTAfter)
				if !c.Train {
					want = 0 // loaded as 0 above; eval does not count
				}
				require.Equal(t, want, bn.NumBatchesTracked.Item())
			}
		})
	}
}

type lossCase struct {
	Name      string     `json:"name"`
	Loss      string     `json:"loss"`
	Reduction string     `json:"reduction"`
	Input     fixTensor  `json:"input"`
	Target    *fixTensor `json:"target"`
	Classes   []int      `json:"classes"`
	Out       fixTensor  `json:"out"`
	GradOut   fixTensor  `json:"grad_out"`
	GradInput fixTensor  `json:"grad_input"`
}

// fixtureReductions maps the fixtures' reduction names to ours.
var fixtureReductions = map[string]autograd.Reduction{
	"mean": autograd.ReductionMean, "sum": autograd.ReductionSum, "none": autograd.ReductionNone,
}

func TestLossesMatchTorch(t *testing.T) {
	var fx struct{ Cases []lossCase }
	loadFixture(t, "losses.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			red, ok := fixtureReductions[c.Reduction]
			require.True(t, ok)
			x := autograd.Param(c.Input.f32())
			var out *autograd.Variable
			switch c.Loss {
			case "mse":
				out = MSELoss{Reduction: red}.Forward(x, constOf(c.Target))
			case "cross_entropy":
				out = CrossEntropyLoss{Reduction: red}.Forward(x, c.Classes)
			case "bce_with_logits":
				out = BCEWithLogitsLoss{Reduction: red}.Forward(x, constOf(c.Target))
			default:
				t.Fatalf("unknown loss %q", c.Loss)
			}
			requireClose(t, &c.Out, out.Value, 1e-6, 1e-5, "forward")
			require.NoError(t, out.BackwardWith(c.GradOut.f32()))
			requireClose(t, &c.GradInput, x.Grad, 1e-6, 1e-4, "grad input")
		})
	}
}

func TestLinearInitMatchesTorchBounds(t *testing.T) {
	l := NewLinear(tensor.NewRNG(7), 400, 300)
	bound := float32(1 / 20.0) // 1/sqrt(400)
	var sum, sumSq float64
	for _, v := range l.Weight.Value.F32() {
		require.LessOrEqual(t, v, bound)
		require.GreaterOrEqual(t, v, -bound)
		sum += float64(v)
		sumSq += float64(v) * float64(v)
	}
	n := float64(l.Weight.Value.Numel())
	// U(-b, b) has mean 0 and variance b^2/3.
	require.InDelta(t, 0, sum/n, 0.001)
	require.InDelta(t, float64(bound*bound)/3, sumSq/n, 0.02*float64(bound*bound)/3)
	for _, v := range l.Bias.Value.F32() {
		require.LessOrEqual(t, v, bound)
		require.GreaterOrEqual(t, v, -bound)
	}
	// Same seed, same weights.
	l2 := NewLinear(tensor.NewRNG(7), 400, 300)
	require.Equal(t, l.Weight.Value.F32(), l2.Weight.Value.F32())
}

func TestDropout(t *testing.T) {
	x := tensor.New(tensor.Float32, 100, 100)
	fill32(x.F32(), 1)
	d := NewDropout(tensor.NewRNG(3), 0.25)
	y := d.Forward(autograd.Param(x)).Value.F32()
	zeros := 0
	for _, v := range y {
		if v == 0 {
			zeros++
		} else {
			require.InDelta(t, 1/0.75, v, 1e-6)
		}
	}
	require.InDelta(t, 0.25, float64(zeros)/float64(len(y)), 0.02)

	d.Train(false)
	xv := autograd.Param(x)
	require.Same(t, xv, d.Forward(xv), "eval mode is the identity")
	require.Same(t, xv, NewDropout(tensor.NewRNG(3), 0).Forward(xv))
	require.Panics(t, func() { NewDropout(tensor.NewRNG(3), 1.5) })
}
