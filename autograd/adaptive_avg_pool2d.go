package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// AdaptiveAvgPool2d is torch.nn.functional.adaptive_avg_pool2d over x [N,
// C, H, W] to [N, C, oh, ow]: output row i averages input rows
// [floor(i*H/oh), ceil((i+1)*H/oh)), and likewise for columns, so windows
// may overlap or differ in size.
func AdaptiveAvgPool2d(x *Variable, oh, ow int) *Variable {
	xs := x.Value.Shape()
	if len(xs) != 4 || oh < 1 || ow < 1 {
		panic(fmt.Sprintf("autograd: AdaptiveAvgPool2d: input %v to output %dx%d, want a [N, C, H, W] input and a positive size", xs, oh, ow))
	}
	g := poolGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], oh: oh, ow: ow}
	y := tensor.AvgPool2d(x.Value, g.shape(), false, true)
	return FromOp(y, &adaptiveAvgPool2dOp{inputs: ins(x), g: g})
}

type adaptiveAvgPool2dOp struct {
	inputs
	g poolGeom
}

func (o *adaptiveAvgPool2dOp) Name() string { return "AdaptiveAvgPool2d" }
func (o *adaptiveAvgPool2dOp) freshGrads()  {}

func (o *adaptiveAvgPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.AvgPool2dBackward(gy, o.g.shape(), false, true)}
}
