package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// LayerNorm normalizes the last dimension of its input to zero mean and unit
// variance, then applies an elementwise affine Weight and Bias (torch's
// nn.LayerNorm(dim) with elementwise_affine=True).
type LayerNorm struct {
	mode
	Weight *autograd.Variable // [dim], ones at init
	Bias   *autograd.Variable // [dim], zeros at init
	Eps    float64
}

// NewLayerNorm returns a float32 LayerNorm over a last dimension of size dim,
// with torch's default eps 1e-5.
func NewLayerNorm(dim int) *LayerNorm {
	if dim <= 0 {
		panic(fmt.Sprintf("nn: LayerNorm(%d): size must be positive", dim))
	}
	w := tensor.New(tensor.Float32, dim)
	fill32(w.F32(), 1)
	return &LayerNorm{Weight: autograd.Param(w), Bias: autograd.Param(tensor.New(tensor.Float32, dim)), Eps: 1e-5}
}

// NamedParameters implements Module: "weight", "bias".
func (l *LayerNorm) NamedParameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: l.Weight}, {Name: "bias", Param: l.Bias}}
}

// NamedBuffers implements Module (none).
func (l *LayerNorm) NamedBuffers() []NamedBuffer { return nil }

// Forward implements Layer.
func (l *LayerNorm) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.LayerNorm(x, l.Weight, l.Bias, l.Eps)
}

func fill32(d []float32, v float32) {
	for i := range d {
		d[i] = v
	}
}
