package optim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

type schedCase struct {
	Name    string         `json:"name"`
	Config  map[string]any `json:"config"`
	BaseLRs []float64      `json:"base_lrs"`
	LRs     [][]float64    `json:"lrs"`
}

// twoGroupSGD mirrors the fixture's optimizer: two groups, lr 0.1 and 0.05.
func twoGroupSGD(t *testing.T, base []float64) *SGD {
	t.Helper()
	o, err := NewSGD(nil, SGDConfig{LR: base[0]})
	require.NoError(t, err)
	for i, lr := range base {
		p := autograd.Param(tensor.New(tensor.Float32, i+2))
		require.NoError(t, o.AddParamGroup(ParamGroup{Params: []*autograd.Variable{p}, LR: lr}))
	}
	return o
}

func buildSchedulers(t *testing.T, opt Optimizer, c map[string]any) []Scheduler {
	t.Helper()
	f := func(k string) float64 { return c[k].(float64) }
	must := func(s Scheduler, err error) Scheduler {
		require.NoError(t, err)
		return s
	}
	switch c["kind"] {
	case "StepLR":
		return []Scheduler{must(NewStepLR(opt, int(f("step_size")), f("gamma")))}
	case "CosineAnnealingLR":
		return []Scheduler{must(NewCosineAnnealingLR(opt, int(f("T_max")), f("eta_min")))}
	case "LinearWarmup":
		return []Scheduler{must(NewLinearWarmup(opt, f("start_factor"), int(f("total_iters"))))}
	case "LinearLR":
		return []Scheduler{must(NewLinearLR(opt, f("start_factor"), f("end_factor"), int(f("total_iters"))))}
	case "Chained":
		return []Scheduler{
			must(NewLinearWarmup(opt, f("start_factor"), int(f("total_iters")))),
			must(NewCosineAnnealingLR(opt, int(f("T_max")), f("eta_min"))),
		}
	}
	t.Fatalf("unknown scheduler %v", c["kind"])
	return nil
}

func lrs(o Optimizer) []float64 {
	var out []float64
	for _, g := range o.ParamGroups() {
		out = append(out, g.LR)
	}
	return out
}

func TestSchedulersMatchTorch(t *testing.T) {
	var fx struct{ Cases []schedCase }
	loadFixture(t, "schedulers.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, sc := range fx.Cases {
		t.Run(sc.Name, func(t *testing.T) {
			opt := twoGroupSGD(t, sc.BaseLRs)
			scheds := buildSchedulers(t, opt, sc.Config)
			for step, want := range sc.LRs {
				if step > 0 {
					require.NoError(t, opt.Step())
					for _, s := range scheds {
						s.Step()
					}
				}
				require.InDeltaSlice(t, want, lrs(opt), 1e-12, "after %d steps", step)
				require.InDeltaSlice(t, want, scheds[len(scheds)-1].LastLR(), 1e-12)
				require.Equal(t, step, scheds[0].LastEpoch())
			}
			for _, g := range opt.ParamGroups() {
				require.NotZero(t, g.InitialLR)
			}
		})
	}
}

func TestSchedulerStateDictResume(t *testing.T) {
	var fx struct{ Cases []schedCase }
	loadFixture(t, "schedulers.json", &fx)
	for _, sc := range fx.Cases {
		t.Run(sc.Name, func(t *testing.T) {
			opt := twoGroupSGD(t, sc.BaseLRs)
			scheds := buildSchedulers(t, opt, sc.Config)
			for i := 0; i < 4; i++ {
				for _, s := range scheds {
					s.Step()
				}
			}
			// Resume: fresh optimizer and schedulers, load both state dicts.
			opt2 := twoGroupSGD(t, sc.BaseLRs)
			scheds2 := buildSchedulers(t, opt2, sc.Config)
			require.NoError(t, opt2.LoadStateDict(opt.StateDict()))
			for i := range scheds {
				require.NoError(t, scheds2[i].LoadStateDict(scheds[i].StateDict()))
			}
			for step := 5; step < len(sc.LRs); step++ {
				for i := range scheds {
					scheds[i].Step()
					scheds2[i].Step()
				}
				require.InDeltaSlice(t, sc.LRs[step], lrs(opt2), 1e-12, "step %d", step)
				require.Equal(t, lrs(opt), lrs(opt2))
			}
		})
	}
}

func TestSchedulerErrors(t *testing.T) {
	o := twoGroupSGD(t, []float64{0.1})
	_, err := NewStepLR(o, 0, 0.1)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewCosineAnnealingLR(o, 0, 0)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewLinearWarmup(o, 0, 5)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewLinearLR(o, 0.5, 1.5, 5)
	require.ErrorIs(t, err, ErrInvalidConfig)

	s, err := NewStepLR(o, 2, 0.5)
	require.NoError(t, err)
	c, err := NewCosineAnnealingLR(o, 3, 0)
	require.NoError(t, err)
	require.ErrorIs(t, s.LoadStateDict(c.StateDict()), ErrStateDict)
	require.ErrorIs(t, s.LoadStateDict(nil), ErrStateDict)
}
