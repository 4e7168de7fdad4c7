//go:build !cuda

package gorgoniaddp_test

import (
	"context"
	"github.com/goddp/goddp/comm/commtest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/ddp/gorgoniaddp"
	"github.com/goddp/goddp/tensor"
)

// The gradients the adapter delivers to the goddp leaves are those of the
// same MLP written with goddp's own autograd.
func TestGradsMatchGoddpAutograd(t *testing.T) {
	m, model, err := newModel(0, 1)
	require.NoError(t, err)
	defer model.Close()
	loss, err := model.Loss()
	require.NoError(t, err)
	require.NoError(t, loss.Backward())

	w := initial()
	ps := make([]*autograd.Variable, len(w))
	for i := range w {
		ps[i] = autograd.Param(w[i])
	}
	x, y := dataset(0, nSamples)
	h := autograd.ReLU(autograd.Add(autograd.MatMul(autograd.Const(x), ps[0]), ps[1]))
	pred := autograd.Add(autograd.MatMul(h, ps[2]), ps[3])
	want := autograd.MSELoss(pred, autograd.Const(y), autograd.ReductionMean)
	require.NoError(t, want.Backward())

	assert.InDelta(t, want.Value.Item(), loss.Value.Item(), 1e-5)
	params := model.NamedParameters()
	require.Len(t, params, 4)
	for i, p := range params {
		assert.Equal(t, m.learnables[i].Name(), p.Name)
		assert.Equal(t, w[i].Shape(), p.Param.Grad.Shape(), p.Name)
		assert.InDeltaSlice(t, ps[i].Grad.F32(), p.Param.Grad.F32(), 1e-5, p.Name)
	}
}

// Leaf gradients accumulate across passes like torch's .grad, while each
// run's gorgonia gradients start from zero; a seed scales them.
func TestGradAccumulation(t *testing.T) {
	_, model, err := newModel(0, 1)
	require.NoError(t, err)
	defer model.Close()
	p := model.NamedParameters()[2].Param

	loss, err := model.Loss()
	require.NoError(t, err)
	require.NoError(t, loss.Backward())
	once := append([]float32(nil), p.Grad.F32()...)

	loss, err = model.Loss()
	require.NoError(t, err)
	require.NoError(t, loss.Backward())
	for i := range once {
		assert.InDelta(t, 2*once[i], p.Grad.F32()[i], 1e-5)
	}

	p.ZeroGrad()
	loss, err = model.Loss()
	require.NoError(t, err)
	require.NoError(t, loss.BackwardWith(tensor.Scalar(tensor.Float32, 3)))
	for i := range once {
		assert.InDelta(t, 3*once[i], p.Grad.F32()[i], 1e-4)
	}
}

// The parameters share memory with the graph: writing one changes the cost.
func TestParametersAliasGraph(t *testing.T) {
	m, model, err := newModel(0, 1)
	require.NoError(t, err)
	defer model.Close()
	before, err := model.Loss()
	require.NoError(t, err)
	tensor.Fill(model.NamedParameters()[3].Param.Value, 100)
	assert.Equal(t, float32(100), m.learnables[3].Value().(*gt.Dense).Data().([]float32)[0])
	after, err := model.Loss()
	require.NoError(t, err)
	assert.Greater(t, after.Value.Item(), before.Value.Item()+1000)
}

// Scalar learnables (gorgonia *F32) work too: y = a*x + c.
func TestScalarLearnables(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, gt.Float32, G.WithShape(4), G.WithName("x"), G.WithValue(gt.New(gt.WithBacking([]float32{1, 2, 3, 4}))))
	a := G.NewScalar(g, gt.Float32, G.WithName("a"), G.WithValue(float32(2)))
	c := G.NewScalar(g, gt.Float32, G.WithName("c"), G.WithValue(float32(1)))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Add(G.Must(G.Mul(x, a)), c))))))
	model, err := gorgoniaddp.New(cost, G.Nodes{a, c})
	require.NoError(t, err)
	defer model.Close()
	loss, err := model.Loss()
	require.NoError(t, err)
	require.NoError(t, loss.Backward())
	// cost = mean((2x+1)^2) over x = 1..4: 3², 5², 7², 9² → 41.
	assert.InDelta(t, 41, loss.Value.Item(), 1e-5)
	// d/da = mean(2(2x+1)x) = (6+20+42+72)/4 = 35; d/dc = mean(2(2x+1)) = 12.
	ps := model.NamedParameters()
	assert.InDelta(t, 35, ps[0].Param.Grad.Item(), 1e-4)
	assert.InDelta(t, 12, ps[1].Param.Grad.Item(), 1e-4)
}

func TestForwardBindsInput(t *testing.T) {
	m := buildMLP(nSamples, initial())
	x, y := dataset(0, nSamples)
	require.NoError(t, m.let(tensor.Zeros(tensor.Float32, nSamples, nIn), y))
	model, err := gorgoniaddp.New(m.cost, m.learnables, gorgoniaddp.WithInput(m.x))
	require.NoError(t, err)
	defer model.Close()
	zero := model.Forward(nil).Value.Item()
	got := model.Forward(autograd.Const(x)).Value.Item()
	assert.NotEqual(t, zero, got)

	_, noInput, err := newModel(0, 1)
	require.NoError(t, err)
	defer noInput.Close()
	assert.PanicsWithValue(t, gorgoniaddp.ErrGraph.Error()+": Forward got an input but New was given no WithInput node",
		func() { noInput.Forward(autograd.Const(x)) })
}

func TestErrors(t *testing.T) {
	newGraph := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		w := G.NewVector(g, gt.Float32, G.WithShape(3), G.WithName("w"), G.WithValue(gt.New(gt.WithBacking([]float32{1, 2, 3}))))
		return g, w, G.Must(G.Sum(G.Must(G.Square(w))))
	}
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"no learnables", func() error {
			_, _, cost := newGraph()
			_, err := gorgoniaddp.New(cost, nil)
			return err
		}, gorgoniaddp.ErrGraph},
		{"vector cost", func() error {
			_, w, _ := newGraph()
			_, err := gorgoniaddp.New(G.Must(G.Square(w)), G.Nodes{w})
			return err
		}, gorgoniaddp.ErrGraph},
		{"duplicate names", func() error {
			_, w, cost := newGraph()
			_, err := gorgoniaddp.New(cost, G.Nodes{w, w})
			return err
		}, gorgoniaddp.ErrGraph},
		{"no value", func() error {
			g, w, _ := newGraph()
			v := G.NewVector(g, gt.Float32, G.WithShape(3), G.WithName("v"))
			cost := G.Must(G.Sum(G.Must(G.HadamardProd(w, v))))
			_, err := gorgoniaddp.New(cost, G.Nodes{v})
			return err
		}, gorgoniaddp.ErrGraph},
		{"int learnable", func() error {
			g, _, _ := newGraph()
			v := G.NewVector(g, gt.Int, G.WithShape(2), G.WithName("v"), G.WithValue(gt.New(gt.WithBacking([]int{1, 2}))))
			_, err := gorgoniaddp.New(G.Must(G.Sum(v)), G.Nodes{v})
			return err
		}, gorgoniaddp.ErrGraph},
		{"rebound learnable", func() error {
			_, w, cost := newGraph()
			model, err := gorgoniaddp.New(cost, G.Nodes{w})
			if err != nil {
				return err
			}
			defer model.Close()
			if err := G.Let(w, gt.New(gt.WithBacking([]float32{4, 5, 6}))); err != nil {
				return err
			}
			_, err = model.Loss()
			return err
		}, gorgoniaddp.ErrRebound},
		{"step with another model's DDP", func() error {
			_, w, cost := newGraph()
			model, err := gorgoniaddp.New(cost, G.Nodes{w})
			if err != nil {
				return err
			}
			_, w2, cost2 := newGraph()
			other, err := gorgoniaddp.New(cost2, G.Nodes{w2})
			if err != nil {
				return err
			}
			d, err := ddp.Wrap(context.Background(), other, commtest.NewGroups(1)[0])
			if err != nil {
				return err
			}
			defer d.Close()
			_, err = gorgoniaddp.Step(d, model)
			return err
		}, gorgoniaddp.ErrGraph},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.run(), tc.want)
		})
	}
}
