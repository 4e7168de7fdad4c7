package autograd

import "github.com/goddp/goddp/tensor"

// AvgPool2d is torch.nn.functional.avg_pool2d over x [N, C, H, W]: the mean
// of each kernel window. With countIncludePad (torch's default) padding
// counts as zeros in the divisor, so it is always kh*kw; without it, the
// divisor is the number of input elements in the window.
func AvgPool2d(x *Variable, p PoolParams, countIncludePad bool) *Variable {
	g := newPoolGeom("AvgPool2d", x.Value.Shape(), p)
	y := tensor.AvgPool2d(x.Value, g.shape(), countIncludePad, false)
	return FromOp(y, &avgPool2dOp{inputs: ins(x), g: g, incl: countIncludePad})
}

type avgPool2dOp struct {
	inputs
	g    poolGeom
	incl bool
}

func (o *avgPool2dOp) Name() string { return "AvgPool2d" }
func (o *avgPool2dOp) freshGrads()  {}

func (o *avgPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.AvgPool2dBackward(gy, o.g.shape(), o.incl, false)}
}
