//go:build !cuda

package gorgoniaddp_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/ddp/gorgoniaddp"
	"github.com/goddp/goddp/tensor"
)

// A small float32 MLP regression, built directly in gorgonia:
// pred = relu(x·W1 + b1)·W2 + b2, cost = mean((pred - y)²).
const (
	nIn, nHidden, nOut = 5, 8, 3
	nSamples           = 16
	lr                 = 0.1
	steps              = 6
)

type mlp struct {
	g          *G.ExprGraph
	x, y, cost *G.Node
	learnables G.Nodes
}

// dense copies a goddp tensor into a fresh gorgonia Dense.
func dense(t *tensor.Tensor) *gt.Dense {
	return gt.New(gt.WithShape(t.Shape()...), gt.WithBacking(append([]float32(nil), t.F32()...)))
}

// initial returns the same initial weights on every rank.
func initial() []*tensor.Tensor {
	rng := tensor.NewRNG(7)
	return []*tensor.Tensor{
		tensor.MulScalar(tensor.Randn(rng, tensor.Float32, nIn, nHidden), 0.5),
		tensor.MulScalar(tensor.Randn(rng, tensor.Float32, nHidden), 0.1),
		tensor.MulScalar(tensor.Randn(rng, tensor.Float32, nHidden, nOut), 0.5),
		tensor.MulScalar(tensor.Randn(rng, tensor.Float32, nOut), 0.1),
	}
}

// dataset returns nSamples inputs and targets; rows [lo, hi) are one shard.
func dataset(lo, hi int) (x, y *tensor.Tensor) {
	rng := tensor.NewRNG(11)
	xs := tensor.Randn(rng, tensor.Float32, nSamples, nIn)
	ys := tensor.Randn(rng, tensor.Float32, nSamples, nOut)
	return tensor.Narrow(xs, 0, lo, hi-lo).Contiguous(), tensor.Narrow(ys, 0, lo, hi-lo).Contiguous()
}

func buildMLP(batch int, w []*tensor.Tensor) *mlp {
	g := G.NewGraph()
	m := &mlp{g: g}
	m.x = G.NewMatrix(g, gt.Float32, G.WithShape(batch, nIn), G.WithName("x"), G.WithValue(gt.New(gt.Of(gt.Float32), gt.WithShape(batch, nIn))))
	m.y = G.NewMatrix(g, gt.Float32, G.WithShape(batch, nOut), G.WithName("y"), G.WithValue(gt.New(gt.Of(gt.Float32), gt.WithShape(batch, nOut))))
	w1 := G.NewMatrix(g, gt.Float32, G.WithShape(nIn, nHidden), G.WithName("w1"), G.WithValue(dense(w[0])))
	b1 := G.NewVector(g, gt.Float32, G.WithShape(nHidden), G.WithName("b1"), G.WithValue(dense(w[1])))
	w2 := G.NewMatrix(g, gt.Float32, G.WithShape(nHidden, nOut), G.WithName("w2"), G.WithValue(dense(w[2])))
	b2 := G.NewVector(g, gt.Float32, G.WithShape(nOut), G.WithName("b2"), G.WithValue(dense(w[3])))
	h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(m.x, w1)), b1, nil, []byte{0}))))
	pred := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w2)), b2, nil, []byte{0}))
	m.cost = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, m.y))))))
	m.learnables = G.Nodes{w1, b1, w2, b2}
	return m
}

// let binds a batch to the graph's inputs.
func (m *mlp) let(x, y *tensor.Tensor) error {
	if err := G.Let(m.x, dense(x)); err != nil {
		return err
	}
	return G.Let(m.y, dense(y))
}

// weights reads the learnables' current values.
func weights(ns G.Nodes) [][]float32 {
	out := make([][]float32, len(ns))
	for i, n := range ns {
		out[i] = append([]float32(nil), n.Value().(*gt.Dense).Data().([]float32)...)
	}
	return out
}

// trainGorgonia is the single-process reference: plain gorgonia, the whole
// batch, VanillaSolver. It returns the weights after every step.
func trainGorgonia(batchLo, batchHi int) ([][][]float32, error) {
	m := buildMLP(batchHi-batchLo, initial())
	if _, err := G.Grad(m.cost, m.learnables...); err != nil {
		return nil, err
	}
	vm := G.NewTapeMachine(m.g, G.BindDualValues(m.learnables...))
	defer vm.Close()
	solver := G.NewVanillaSolver(G.WithLearnRate(lr))
	x, y := dataset(batchLo, batchHi)
	var hist [][][]float32
	for range steps {
		if err := m.let(x, y); err != nil {
			return nil, err
		}
		if err := vm.RunAll(); err != nil {
			return nil, err
		}
		if err := solver.Step(G.NodesToValueGrads(m.learnables)); err != nil {
			return nil, err
		}
		vm.Reset()
		hist = append(hist, weights(m.learnables))
	}
	return hist, nil
}

// newModel builds this rank's graph over its shard and adapts it.
func newModel(rank, world int) (*mlp, *gorgoniaddp.Model, error) {
	per := nSamples / world
	m := buildMLP(per, initial())
	if rank != 0 {
		// Different starting weights off rank 0: ddp.Wrap must replace them.
		for _, n := range m.learnables {
			n.Value().(*gt.Dense).Zero()
		}
	}
	x, y := dataset(rank*per, (rank+1)*per)
	if err := m.let(x, y); err != nil {
		return nil, nil, err
	}
	model, err := gorgoniaddp.New(m.cost, m.learnables)
	if err != nil {
		return nil, nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	return m, model, nil
}
