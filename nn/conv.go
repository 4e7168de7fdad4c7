package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Conv2d is a 2-d convolution over [N, C, H, W] inputs (torch's nn.Conv2d).
// Weight is [out, in/groups, kh, kw] and Bias [out] or nil, under the state
// dict keys "weight" and "bias".
type Conv2d struct {
	mode
	Weight *autograd.Variable
	Bias   *autograd.Variable
	Params autograd.ConvParams
}

var conv2dOptions = []string{"kernel_size", "stride", "padding", "dilation", "groups", "bias"}

// NewConv2d returns a float32 Conv2d(in, out, kernel) with torch's defaults
// (stride 1, padding 0, dilation 1, groups 1, bias) changed by opts: Stride,
// Padding, PaddingSame, Dilation, Groups, NoBias, KernelSize. It initialises
// as torch does: weight from kaiming_uniform(a=√5), which is U(-1/√fan_in,
// 1/√fan_in) with fan_in = in/groups*kh*kw, then bias from the same range,
// both drawn from rng in that order. Bad sizes panic.
func NewConv2d(rng *tensor.RNG, in, out, kernel int, opts ...WindowOption) *Conv2d {
	o := applyWindow("Conv2d", kernel, conv2dOptions, opts)
	if in <= 0 || out <= 0 || o.kernel[0] <= 0 || o.kernel[1] <= 0 {
		panic(fmt.Sprintf("nn: Conv2d(%d, %d, kernel %v): sizes must be positive", in, out, o.kernel))
	}
	if o.groups <= 0 || in%o.groups != 0 || out%o.groups != 0 {
		panic(fmt.Sprintf("nn: Conv2d(%d, %d): groups=%d must divide both channel counts", in, out, o.groups))
	}
	w := tensor.New(tensor.Float32, out, in/o.groups, o.kernel[0], o.kernel[1])
	var b *tensor.Tensor
	if !o.noBias {
		b = tensor.New(tensor.Float32, out)
	}
	ResetLinearParameters_(rng, w, b)
	c := &Conv2d{Weight: autograd.Param(w), Params: o.convParams()}
	if b != nil {
		c.Bias = autograd.Param(b)
	}
	c.check()
	return c
}

// NewConv2dFrom wraps existing tensors (weight [out, in/groups, kh, kw], bias
// [out] or nil) as a Conv2d's parameters, for fixed weights or float64
// models. The kernel size comes from weight; pass the other options as to
// NewConv2d.
func NewConv2dFrom(weight, bias *tensor.Tensor, opts ...WindowOption) *Conv2d {
	if weight.Dim() != 4 {
		panic(fmt.Sprintf("nn: Conv2d weight must be [out, in/groups, kh, kw], got %v", weight.Shape()))
	}
	o := applyWindow("Conv2d", weight.Size(2), conv2dOptions, opts)
	c := &Conv2d{Weight: autograd.Param(weight), Params: o.convParams()}
	if bias != nil {
		if bias.Dim() != 1 || bias.Size(0) != weight.Size(0) {
			panic(fmt.Sprintf("nn: Conv2d bias shape %v does not match weight %v", bias.Shape(), weight.Shape()))
		}
		c.Bias = autograd.Param(bias)
	}
	c.check()
	return c
}

func (w *window) convParams() autograd.ConvParams {
	return autograd.ConvParams{Stride: orOne(w.stride), Padding: w.padding, Dilation: orOne(w.dilation), Groups: w.groups, Same: w.same}
}

func orOne(p [2]int) [2]int {
	for i := range p {
		if p[i] == 0 {
			p[i] = 1
		}
	}
	return p
}

func (c *Conv2d) check() {
	p := c.Params
	if p.Stride[0] < 1 || p.Stride[1] < 1 || p.Dilation[0] < 1 || p.Dilation[1] < 1 || p.Padding[0] < 0 || p.Padding[1] < 0 {
		panic(fmt.Sprintf("nn: Conv2d: invalid stride %v, padding %v or dilation %v", p.Stride, p.Padding, p.Dilation))
	}
	if p.Same && (p.Stride != [2]int{1, 1}) {
		panic(fmt.Sprintf("nn: Conv2d: padding='same' is not supported for strided convolutions (stride %v)", p.Stride))
	}
}

// InChannels returns the input channel count.
func (c *Conv2d) InChannels() int { return c.Weight.Value.Size(1) * c.Params.Groups }

// OutChannels returns the output channel count.
func (c *Conv2d) OutChannels() int { return c.Weight.Value.Size(0) }

// NamedParameters implements Module: "weight", then "bias".
func (c *Conv2d) NamedParameters() []NamedParameter {
	ps := []NamedParameter{{Name: "weight", Param: c.Weight}}
	if c.Bias != nil {
		ps = append(ps, NamedParameter{Name: "bias", Param: c.Bias})
	}
	return ps
}

// NamedBuffers implements Module (none).
func (c *Conv2d) NamedBuffers() []NamedBuffer { return nil }

// Forward implements Layer.
func (c *Conv2d) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.Conv2d(x, c.Weight, c.Bias, c.Params)
}

// SetPrecision sets the convolution's product precision (Params.Precision)
// and returns the previous one (amp.Autocast calls it).
func (c *Conv2d) SetPrecision(p tensor.Precision) tensor.Precision {
	old := c.Params.Precision
	c.Params.Precision = p
	return old
}
