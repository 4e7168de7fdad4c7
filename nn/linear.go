package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Linear applies y = x Wᵀ + b to the last dimension of x (torch's nn.Linear).
// Weight is [out, in], Bias is [out] or nil.
type Linear struct {
	mode
	Weight *autograd.Variable
	Bias   *autograd.Variable
	// Precision is the arithmetic of the product (default float32);
	// amp.Autocast sets it to bfloat16 for the layers torch's autocast
	// lowers. Weight and Bias stay float32 whatever it is.
	Precision tensor.Precision
}

// NewLinear returns a float32 Linear(in, out) with bias, initialised as
// torch's reset_parameters does (ResetLinearParameters_): weight from
// kaiming_uniform_(a=√5), about U(-1/√in, 1/√in), then bias from
// U(-1/√in, 1/√in), both drawn from rng in that order. With rng =
// tensor.NewRNG(s) and layers built in the same order, the weights equal
// those torch builds after torch.manual_seed(s), bit for bit.
func NewLinear(rng *tensor.RNG, in, out int) *Linear { return newLinear(rng, in, out, true) }

// NewLinearNoBias is NewLinear with bias=False.
func NewLinearNoBias(rng *tensor.RNG, in, out int) *Linear { return newLinear(rng, in, out, false) }

func newLinear(rng *tensor.RNG, in, out int, bias bool) *Linear {
	if in <= 0 || out <= 0 {
		panic(fmt.Sprintf("nn: Linear(%d, %d): sizes must be positive", in, out))
	}
	w := tensor.New(tensor.Float32, out, in)
	var b *tensor.Tensor
	if bias {
		b = tensor.New(tensor.Float32, out)
	}
	ResetLinearParameters_(rng, w, b)
	l := &Linear{Weight: autograd.Param(w)}
	if b != nil {
		l.Bias = autograd.Param(b)
	}
	return l
}

// NewLinearFrom wraps existing tensors (weight [out, in], bias [out] or nil)
// as a Linear's parameters, for fixed weights or float64 models.
func NewLinearFrom(weight, bias *tensor.Tensor) *Linear {
	if weight.Dim() != 2 {
		panic(fmt.Sprintf("nn: Linear weight must be [out, in], got %v", weight.Shape()))
	}
	l := &Linear{Weight: autograd.Param(weight)}
	if bias != nil {
		if bias.Dim() != 1 || bias.Size(0) != weight.Size(0) {
			panic(fmt.Sprintf("nn: Linear bias shape %v does not match weight %v", bias.Shape(), weight.Shape()))
		}
		l.Bias = autograd.Param(bias)
	}
	return l
}

// InFeatures returns the input width.
func (l *Linear) InFeatures() int { return l.Weight.Value.Size(1) }

// OutFeatures returns the output width.
func (l *Linear) OutFeatures() int { return l.Weight.Value.Size(0) }

// NamedParameters implements Module: "weight", then "bias".
func (l *Linear) NamedParameters() []NamedParameter {
	ps := []NamedParameter{{Name: "weight", Param: l.Weight}}
	if l.Bias != nil {
		ps = append(ps, NamedParameter{Name: "bias", Param: l.Bias})
	}
	return ps
}

// NamedBuffers implements Module (none).
func (l *Linear) NamedBuffers() []NamedBuffer { return nil }

// Forward implements Layer.
func (l *Linear) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.LinearWith(x, l.Weight, l.Bias, l.Precision)
}

// ForwardGELU returns GELU(Forward(x)), torch's F.gelu(linear(x)): one
// op where the host computes both (autograd.LinearGELU, the same values,
// one pass less over the gradient), the two ops elsewhere.
func (l *Linear) ForwardGELU(x *autograd.Variable) *autograd.Variable {
	return autograd.LinearGELU(x, l.Weight, l.Bias, l.Precision)
}

// ForwardGELULinear returns next.Forward(l.ForwardGELU(x)), torch's
// next(F.gelu(l(x))), a transformer's MLP: one op under bf16 products on
// the host (autograd.LinearGELULinear: the GELU's output is only ever
// rounded for next, never stored in float32), l's precision for both.
func (l *Linear) ForwardGELULinear(next *Linear, x *autograd.Variable) *autograd.Variable {
	return autograd.LinearGELULinear(x, l.Weight, l.Bias, next.Weight, next.Bias, l.Precision)
}

// SetPrecision sets the product's precision and returns the previous one
// (amp.Autocast calls it on every layer it lowers).
func (l *Linear) SetPrecision(p tensor.Precision) tensor.Precision {
	old := l.Precision
	l.Precision = p
	return old
}
