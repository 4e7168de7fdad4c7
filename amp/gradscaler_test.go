package amp

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

type fixture struct {
	Torch     string `json:"torch"`
	Sequences []struct {
		Name           string    `json:"name"`
		InitScale      float64   `json:"init_scale"`
		GrowthFactor   float64   `json:"growth_factor"`
		BackoffFactor  float64   `json:"backoff_factor"`
		GrowthInterval int       `json:"growth_interval"`
		InfSteps       []int     `json:"inf_steps"`
		Scales         []float64 `json:"scales"`
		Trackers       []int     `json:"trackers"`
	} `json:"sequences"`
	Unscale struct {
		Scale    float64     `json:"scale"`
		InvScale float64     `json:"inv_scale"`
		Grads    [][]float64 `json:"grads"`
		Shapes   [][]int     `json:"shapes"`
		Unscaled [][]float64 `json:"unscaled"`
	} `json:"unscale"`
}

func loadFixture(t *testing.T) fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/gradscaler.json")
	require.NoError(t, err, "regenerate with scripts/gen_fixtures_gradscaler.py")
	var f fixture
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Sequences)
	return f
}

// oneParam is an SGD over one parameter whose gradient the test sets.
func oneParam(t *testing.T) (*autograd.Variable, optim.Optimizer) {
	t.Helper()
	return oneParamNoT()
}

func oneParamNoT() (*autograd.Variable, optim.Optimizer) {
	p := autograd.Param(tensor.FromF32([]float32{1, 2, 3}, 3))
	opt, err := optim.NewSGD([]*autograd.Variable{p}, optim.SGDConfig{LR: 0.5})
	if err != nil {
		panic(err) // a valid constant configuration
	}
	return p, opt
}

// TestScaleSequenceMatchesTorch drives a GradScaler through each fixture
// sequence with real gradients (an inf in them on the fixture's overflow
// steps) and requires torch's scale and growth tracker after every step,
// bit for bit, and the optimizer skipped exactly on the overflow steps.
func TestScaleSequenceMatchesTorch(t *testing.T) {
	f := loadFixture(t)
	for _, seq := range f.Sequences {
		t.Run(seq.Name, func(t *testing.T) {
			s, err := NewGradScaler(GradScalerConfig{InitScale: seq.InitScale, GrowthFactor: seq.GrowthFactor,
				BackoffFactor: seq.BackoffFactor, GrowthInterval: seq.GrowthInterval})
			require.NoError(t, err)
			p, opt := oneParam(t)
			inf := map[int]bool{}
			for _, k := range seq.InfSteps {
				inf[k] = true
			}
			ctx := context.Background()
			for step, want := range seq.Scales {
				g := []float32{s.Scale(), 0, -s.Scale()} // unscales to {1, 0, -1}
				if inf[step] {
					g[1] = float32(math.Inf(1))
				}
				p.Grad = tensor.FromF32(g, 3)
				before := append([]float32(nil), p.Value.F32()...)
				skipped, err := s.Step(ctx, opt)
				require.NoError(t, err)
				require.Equal(t, inf[step], skipped, "step %d", step)
				if skipped {
					require.Equal(t, before, p.Value.F32(), "step %d: a skipped step changed the parameter", step)
				} else {
					require.Equal(t, []float32{before[0] - 0.5, before[1], before[2] + 0.5}, p.Value.F32(), "step %d: the step saw unscaled gradients", step)
				}
				s.Update()
				require.Equal(t, float32(want), s.Scale(), "step %d: scale", step)
				require.Equal(t, seq.Trackers[step], s.State().GrowthTracker, "step %d: growth tracker", step)
			}
		})
	}
}

func TestUnscaleMatchesTorch(t *testing.T) {
	f := loadFixture(t)
	u := f.Unscale
	s, err := NewGradScaler(GradScalerConfig{InitScale: u.Scale})
	require.NoError(t, err)
	var params []*autograd.Variable
	for i, g := range u.Grads {
		x := make([]float32, len(g))
		for k, v := range g {
			x[k] = float32(v)
		}
		p := autograd.Param(tensor.New(tensor.Float32, u.Shapes[i]...))
		p.Grad = tensor.FromF32(x, u.Shapes[i]...)
		params = append(params, p)
	}
	opt, err := optim.NewSGD(params, optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	require.NoError(t, s.Unscale(context.Background(), opt))
	for i, p := range params {
		want := make([]float32, len(u.Unscaled[i]))
		for k, v := range u.Unscaled[i] {
			want[k] = float32(v)
		}
		require.Equal(t, want, p.Grad.F32(), "gradient %d", i)
	}
	require.False(t, s.foundInf)
	require.Error(t, s.Unscale(context.Background(), opt), "a second Unscale in one step")
}

func TestUnscaleFindsNaNInAView(t *testing.T) {
	s, err := NewGradScaler(GradScalerConfig{InitScale: 4})
	require.NoError(t, err)
	p := autograd.Param(tensor.New(tensor.Float32, 2, 2))
	full := tensor.FromF32([]float32{8, float32(math.NaN()), 4, 12}, 2, 2)
	p.Grad = tensor.Transpose(full, 0, 1) // a strided gradient
	opt, err := optim.NewSGD([]*autograd.Variable{p}, optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	skipped, err := s.Step(context.Background(), opt)
	require.NoError(t, err)
	require.True(t, skipped)
	require.Equal(t, float32(2), full.F32()[0], "the view was unscaled in place")
	s.Update()
	require.Equal(t, float32(2), s.Scale())
}

func TestStateRoundTrip(t *testing.T) {
	s, err := NewGradScaler(GradScalerConfig{GrowthInterval: 3})
	require.NoError(t, err)
	_, opt := oneParam(t)
	for range 2 {
		_, err := s.Step(context.Background(), opt)
		require.NoError(t, err)
		s.Update()
	}
	st := s.State()
	require.Equal(t, State{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, GrowthTracker: 2}, st)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(b, &back))
	r, err := NewGradScaler(GradScalerConfig{})
	require.NoError(t, err)
	require.NoError(t, r.LoadState(back))
	_, err = r.Step(context.Background(), opt)
	require.NoError(t, err)
	r.Update()
	require.Equal(t, float32(131072), r.Scale(), "the third clean step after the restore grows the scale")

	require.ErrorIs(t, r.LoadState(State{Scale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, GrowthTracker: 3}), ErrConfig)
	require.ErrorIs(t, r.LoadState(State{Scale: 1, GrowthFactor: 0.5, BackoffFactor: 0.5, GrowthInterval: 3}), ErrConfig)
}

func TestConfigErrorsAndDisabled(t *testing.T) {
	for _, c := range []GradScalerConfig{{InitScale: -1}, {GrowthFactor: 1}, {BackoffFactor: 1}, {GrowthInterval: -2}, {InitScale: math.Inf(1)}} {
		_, err := NewGradScaler(c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	s, err := NewGradScaler(GradScalerConfig{Disabled: true})
	require.NoError(t, err)
	loss := autograd.Param(tensor.FromF32([]float32{3}))
	require.Same(t, loss, s.ScaleLoss(loss))
	p, opt := oneParam(t)
	p.Grad = tensor.FromF32([]float32{float32(math.Inf(1)), 0, 0}, 3)
	skipped, err := s.Step(context.Background(), opt)
	require.NoError(t, err)
	require.False(t, skipped, "a disabled scaler never skips")
	require.Equal(t, float32(1), s.Scale())
}

func TestScaleLossScalesGradients(t *testing.T) {
	s, err := NewGradScaler(GradScalerConfig{InitScale: 1024})
	require.NoError(t, err)
	w := autograd.Param(tensor.FromF32([]float32{2}, 1))
	loss := autograd.SumAll(autograd.Mul(w, w))
	require.NoError(t, s.ScaleLoss(loss).Backward())
	require.Equal(t, []float32{4 * 1024}, w.Grad.F32())
}
