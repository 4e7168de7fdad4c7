package autograd

import "github.com/goddp/goddp/tensor"

// Add returns a + b with broadcasting. Each input's gradient is gy, reduced
// to the input's shape by the engine.
func Add(a, b *Variable) *Variable {
	return FromOp(tensor.Add(a.Value, b.Value), &addOp{ins(a, b)})
}

// addOp hands gy itself to both inputs, so it is not a freshGrads op.
type addOp struct{ inputs }

func (o *addOp) Name() string { return "Add" }

// broadcastGrads: a broadcast gy passes through to both inputs as it is.
func (o *addOp) broadcastGrads() {}

func (o *addOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{gy, gy}
}
