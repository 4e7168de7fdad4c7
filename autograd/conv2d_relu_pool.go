package autograd

import "github.com/goddp/goddp/tensor"

// Conv2dReLUMaxPool2d returns MaxPool2d(ReLU(Conv2d(x, w, b, cp)), pp),
// with the same values and gradients. Where the pooling is 2x2 with
// stride 2 and no padding, the backward masks the pooled gradient instead
// of the convolution's: the element a window routes its gradient to is
// its maximum, whose ReLU output is the pooled value, so ReLU's mask at it
// is (pooled value > 0), and every other element of the window gets 0
// either way. That reads the pooled output (a quarter of the size)
// instead of the convolution's, and saves ReLU's own pass over the
// convolution's gradient: at batch 64 a convnet's first convolution makes
// 6.4 MB a step. Elsewhere it is Conv2dReLU and MaxPool2d. nn.Sequential
// calls it for a Conv2d, a ReLU and such a MaxPool2d in a row.
func Conv2dReLUMaxPool2d(x, w, b *Variable, cp ConvParams, pp PoolParams) *Variable {
	c, conv := newConv2d(x, w, b, cp, true)
	g := newPoolGeom("MaxPool2d", conv.y.Shape(), pp)
	if !g.window2x2() {
		return MaxPool2d(c, pp)
	}
	y, idx := tensor.MaxPool2d(conv.y, g.shape())
	return FromOp(y, &conv2dReLUPoolOp{conv: &conv.conv2dOp, y: y, convOut: conv.y, idx: idx, g: g})
}

// conv2dReLUPoolOp is a Conv2dReLU followed by a 2x2 max pooling: backward
// masks gy where the pooled output is not positive, routes it to the
// windows' maxima, then runs the convolution's backward.
type conv2dReLUPoolOp struct {
	conv    *conv2dOp
	y       *tensor.Tensor // the pooled output
	convOut *tensor.Tensor // the convolution's output (ReLU applied), pooled in the forward
	idx     *tensor.Tensor // per pooled output, its argmax (tensor.MaxPool2d's indices)
	g       poolGeom
}

func (o *conv2dReLUPoolOp) Name() string        { return "Conv2dReLUMaxPool2d" }
func (o *conv2dReLUPoolOp) Inputs() []*Variable { return o.conv.Inputs() }
func (o *conv2dReLUPoolOp) freshGrads()         {}
func (o *conv2dReLUPoolOp) savedTensors() []*tensor.Tensor {
	return []*tensor.Tensor{o.convOut, o.idx}
}

func (o *conv2dReLUPoolOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

func (o *conv2dReLUPoolOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	m := tensor.EmptyAs(gy, gy.Shape()...) // ReLUBackward writes every element
	tensor.ReLUBackward(m, gy, o.y)
	gx := tensor.MaxPool2dBackward(m, o.idx, o.g.shape())
	tensor.ReleaseScratch(m)
	grads := o.conv.backwardInto(gx, dst)
	tensor.ReleaseScratch(gx)
	return grads
}
