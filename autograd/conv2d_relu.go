package autograd

import "github.com/goddp/goddp/tensor"

// Conv2dReLU returns ReLU(Conv2d(x, w, b, p)), with the same values and
// gradients, as one op. On the host in float32 with oneDNN's kernels the
// ReLU runs inside the convolution (a post-op on the output while the
// kernel holds it), which saves the separate ReLU's pass over the output
// and its allocation: in a convnet the first convolution's output is 6.4
// MB a step at batch 64, and each pass over it costs about as long as
// memory takes to stream it. Elsewhere (devices, float64, builds without
// oneDNN) the ReLU runs over the convolution's output in place
// (tensor.Conv2dReLU). nn.Sequential calls it for a Conv2d followed by a
// ReLU.
func Conv2dReLU(x, w, b *Variable, p ConvParams) *Variable { return conv2d(x, w, b, p, true) }

// conv2dReLUOp is a convolution whose output went through ReLU: backward
// masks gy where the output is not positive (ReLU's gradient, from its
// output as torch's threshold_backward), then runs the convolution's.
type conv2dReLUOp struct {
	conv2dOp
	y *tensor.Tensor // the op's output, ReLU applied
}

func (o *conv2dReLUOp) Name() string { return "Conv2dReLU" }

func (o *conv2dReLUOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

// backwardInto masks into a new tensor: gy may be shared.
func (o *conv2dReLUOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	m := tensor.EmptyAs(gy, gy.Shape()...) // ReLUBackward writes every element
	tensor.ReLUBackward(m, gy, o.y)
	return o.conv2dOp.backwardInto(m, dst)
}

// backwardInPlace masks an owned gy in place (the engine hands it over
// when nothing else reads it), which saves a tensor of the output's size.
func (o *conv2dReLUOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor {
	tensor.ReLUBackward(gy, gy, o.y)
	return o.conv2dOp.backwardInto(gy, nil)
}
