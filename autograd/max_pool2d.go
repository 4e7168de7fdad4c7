package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// PoolParams are a 2-d pooling window's kernel, stride and padding (torch's
// kernel_size, stride, padding). A zero Stride means the kernel size, as in
// torch. ceil_mode and dilation are not supported (torch's defaults: off, 1).
type PoolParams struct {
	Kernel  [2]int
	Stride  [2]int
	Padding [2]int
}

// poolGeom is one pooling's resolved shapes.
type poolGeom struct {
	n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow int
}

func newPoolGeom(op string, xs []int, p PoolParams) poolGeom {
	if len(xs) != 4 {
		panic(fmt.Sprintf("autograd: %s: input shape %v, want [N, C, H, W]", op, xs))
	}
	g := poolGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], kh: p.Kernel[0], kw: p.Kernel[1],
		sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1]}
	if g.sh == 0 {
		g.sh = g.kh
	}
	if g.sw == 0 {
		g.sw = g.kw
	}
	if g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 {
		panic(fmt.Sprintf("autograd: %s: invalid params %+v", op, p))
	}
	if 2*g.ph > g.kh || 2*g.pw > g.kw {
		panic(fmt.Sprintf("autograd: %s: padding %v should be at most half of kernel %v, as torch requires", op, p.Padding, p.Kernel))
	}
	g.oh = (g.h+2*g.ph-g.kh)/g.sh + 1
	g.ow = (g.w+2*g.pw-g.kw)/g.sw + 1
	if g.h+2*g.ph < g.kh || g.w+2*g.pw < g.kw {
		panic(fmt.Sprintf("autograd: %s: kernel %v larger than the padded input %v", op, p.Kernel, xs))
	}
	return g
}

// MaxPool2d is torch.nn.functional.max_pool2d over x [N, C, H, W]: the
// maximum of each kernel window, padding counting as -inf. Backward routes
// each output's gradient to the input element that was the maximum (the
// first one in row-major window order on ties, as torch's CPU kernel).
func MaxPool2d(x *Variable, p PoolParams) *Variable {
	g := newPoolGeom("MaxPool2d", x.Value.Shape(), p)
	y, idx := tensor.MaxPool2d(x.Value, g.shape())
	return FromOp(y, &maxPool2dOp{inputs: ins(x), idx: idx, g: g})
}

type maxPool2dOp struct {
	inputs
	idx *tensor.Tensor // per output, the argmax's offset in its [H, W] plane (tensor.MaxPool2d's)
	g   poolGeom
}

// savedTensors lets FreeGraph recycle the indices' block.
func (o *maxPool2dOp) savedTensors() []*tensor.Tensor { return []*tensor.Tensor{o.idx} }

func (o *maxPool2dOp) Name() string { return "MaxPool2d" }
func (o *maxPool2dOp) freshGrads()  {}

func (o *maxPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.MaxPool2dBackward(gy, o.idx, o.g.shape())}
}

// window2x2 reports the common 2x2, stride-2, unpadded window, whose
// windows are disjoint and which the fast paths handle.
func (g *poolGeom) window2x2() bool {
	return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0
}

// shape is g in tensor's terms.
func (g *poolGeom) shape() *tensor.Pool2dShape {
	return &tensor.Pool2dShape{N: g.n, C: g.c, H: g.h, W: g.w, KH: g.kh, KW: g.kw, StrideH: g.sh, StrideW: g.sw,
		PadH: g.ph, PadW: g.pw, OH: g.oh, OW: g.ow}
}
