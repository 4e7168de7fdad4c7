package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
)

// MaxPool2d takes the maximum over each kernel window of [N, C, H, W]
// inputs (torch's nn.MaxPool2d; stride defaults to the kernel size, padding
// to 0, ceil_mode and dilation are not supported).
type MaxPool2d struct {
	stateless
	Params autograd.PoolParams
}

// NewMaxPool2d returns MaxPool2d(kernel) changed by opts: Stride, Padding, KernelSize.
func NewMaxPool2d(kernel int, opts ...WindowOption) *MaxPool2d {
	return &MaxPool2d{Params: poolParams("MaxPool2d", kernel, []string{"kernel_size", "stride", "padding"}, opts).p}
}

// Forward implements Layer.
func (m *MaxPool2d) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.MaxPool2d(x, m.Params)
}

// AvgPool2d averages each kernel window of [N, C, H, W] inputs (torch's
// nn.AvgPool2d). CountIncludePad (default true) counts padding in the divisor.
type AvgPool2d struct {
	stateless
	Params          autograd.PoolParams
	CountIncludePad bool
}

// NewAvgPool2d returns AvgPool2d(kernel) changed by opts: Stride, Padding,
// KernelSize, CountIncludePad.
func NewAvgPool2d(kernel int, opts ...WindowOption) *AvgPool2d {
	r := poolParams("AvgPool2d", kernel, []string{"kernel_size", "stride", "padding", "count_include_pad"}, opts)
	return &AvgPool2d{Params: r.p, CountIncludePad: !r.w.excludePad}
}

// Forward implements Layer.
func (a *AvgPool2d) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.AvgPool2d(x, a.Params, a.CountIncludePad)
}

type poolResult struct {
	p autograd.PoolParams
	w window
}

func poolParams(layer string, kernel int, allowed []string, opts []WindowOption) poolResult {
	w := applyWindow(layer, kernel, allowed, opts)
	if w.kernel[0] < 1 || w.kernel[1] < 1 || w.stride[0] < 0 || w.stride[1] < 0 || w.padding[0] < 0 || w.padding[1] < 0 {
		panic(fmt.Sprintf("nn: %s: invalid kernel %v, stride %v or padding %v", layer, w.kernel, w.stride, w.padding))
	}
	if 2*w.padding[0] > w.kernel[0] || 2*w.padding[1] > w.kernel[1] {
		panic(fmt.Sprintf("nn: %s: padding %v should be at most half of kernel %v", layer, w.padding, w.kernel))
	}
	// Stride 0 (unset) means the kernel size, as torch's stride=None.
	return poolResult{p: autograd.PoolParams{Kernel: w.kernel, Stride: w.stride, Padding: w.padding}, w: w}
}

// AdaptiveAvgPool2d averages [N, C, H, W] inputs down (or up) to a fixed
// output size (torch's nn.AdaptiveAvgPool2d).
type AdaptiveAvgPool2d struct {
	stateless
	OutH, OutW int
}

// NewAdaptiveAvgPool2d returns AdaptiveAvgPool2d(size): one value for a
// square output, or (h, w).
func NewAdaptiveAvgPool2d(size ...int) *AdaptiveAvgPool2d {
	s := pair("output_size", size)
	if s[0] < 1 || s[1] < 1 {
		panic(fmt.Sprintf("nn: AdaptiveAvgPool2d: output size %v must be positive", s))
	}
	return &AdaptiveAvgPool2d{OutH: s[0], OutW: s[1]}
}

// Forward implements Layer.
func (a *AdaptiveAvgPool2d) Forward(x *autograd.Variable) *autograd.Variable {
	return autograd.AdaptiveAvgPool2d(x, a.OutH, a.OutW)
}
