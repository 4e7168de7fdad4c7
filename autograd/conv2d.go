package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// ConvParams are the geometry arguments of Conv2d (torch's stride, padding,
// dilation and groups). Zero fields take torch's defaults: stride 1,
// padding 0, dilation 1, groups 1.
type ConvParams struct {
	Stride   [2]int // (h, w)
	Padding  [2]int // zero padding on both sides of (h, w)
	Dilation [2]int // (h, w)
	Groups   int
	// Same is torch's padding="same": the output has the input's size. The
	// total padding dilation*(kernel-1) is split with the smaller half at
	// the top/left, as torch does. It needs stride 1 and ignores Padding.
	Same bool
	// Precision of the products: tensor.PrecisionBFloat16 is autocast's
	// bf16 convolution (bfloat16 inputs, float32 accumulation and result).
	Precision tensor.Precision
}

// convGeom is one convolution's shapes, resolved from ConvParams.
type convGeom struct {
	n, c, h, w     int // input
	o, kh, kw      int // weight [o, c/groups, kh, kw]
	sh, sw         int // stride
	ph, pw         int // top and left padding
	pb, pr         int // bottom and right padding (one more than ph, pw for an odd "same" total)
	dh, dw         int // dilation
	oh, ow         int // output size
	groups, cg, og int // groups, input and output channels per group
	bf16           bool
}

func newConvGeom(xs, ws []int, p ConvParams) convGeom {
	if len(xs) != 4 || len(ws) != 4 {
		panic(fmt.Sprintf("autograd: Conv2d: input %v and weight %v must both be 4-d ([N, C, H, W] and [out, in/groups, kh, kw])", xs, ws))
	}
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	g := convGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], o: ws[0], kh: ws[2], kw: ws[3],
		sh: def(p.Stride[0], 1), sw: def(p.Stride[1], 1), dh: def(p.Dilation[0], 1), dw: def(p.Dilation[1], 1),
		groups: def(p.Groups, 1), bf16: p.Precision == tensor.PrecisionBFloat16}
	if g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.groups < 1 || p.Padding[0] < 0 || p.Padding[1] < 0 {
		panic(fmt.Sprintf("autograd: Conv2d: invalid params %+v", p))
	}
	if g.c%g.groups != 0 || g.o%g.groups != 0 {
		panic(fmt.Sprintf("autograd: Conv2d: %d input and %d output channels must both be divisible by groups=%d", g.c, g.o, g.groups))
	}
	g.cg, g.og = g.c/g.groups, g.o/g.groups
	if ws[1] != g.cg {
		panic(fmt.Sprintf("autograd: Conv2d: weight %v expects %d input channels per group, input %v with groups=%d has %d",
			ws, ws[1], xs, g.groups, g.cg))
	}
	padH, padW := 2*p.Padding[0], 2*p.Padding[1]
	g.ph, g.pw = p.Padding[0], p.Padding[1]
	if p.Same {
		if g.sh != 1 || g.sw != 1 {
			panic(fmt.Sprintf("autograd: Conv2d: padding='same' is not supported for strided convolutions (stride %d, %d)", g.sh, g.sw))
		}
		padH, padW = g.dh*(g.kh-1), g.dw*(g.kw-1)
		g.ph, g.pw = padH/2, padW/2
	}
	g.pb, g.pr = padH-g.ph, padW-g.pw
	g.oh = (g.h+padH-g.dh*(g.kh-1)-1)/g.sh + 1
	g.ow = (g.w+padW-g.dw*(g.kw-1)-1)/g.sw + 1
	if g.h+padH-g.dh*(g.kh-1) < 1 || g.w+padW-g.dw*(g.kw-1) < 1 {
		panic(fmt.Sprintf("autograd: Conv2d: kernel %dx%d (dilation %d, %d) is larger than the padded input %v", g.kh, g.kw, g.dh, g.dw, xs))
	}
	return g
}

// Conv2d is torch.nn.functional.conv2d over x [N, C, H, W] with weight
// [out, C/groups, kh, kw] and bias [out] (nil for none), in NCHW like torch.
// It runs tensor.Conv2d and tensor.Conv2dBackward on the operands'
// device, whose table holds the passes: on the host, float32 on the
// engine's convolution kernels (oneDNN's primitives, each on one thread)
// with the samples split over tensor.Threads() goroutines and a private
// weight gradient per goroutine, summed at the end; elsewhere (float64,
// the pure-Go and -tags nodnnl builds, shapes oneDNN refuses) one GEMM
// per sample and group over the sample's im2col matrix, in the same
// goroutines.
func Conv2d(x, w, b *Variable, p ConvParams) *Variable { return conv2d(x, w, b, p, false) }

// conv2d is Conv2d, followed by ReLU when relu is set (Conv2dReLU): one
// op, the ReLU fused into the convolution's kernel where the device has
// one (tensor.Conv2dReLU).
func conv2d(x, w, b *Variable, p ConvParams, relu bool) *Variable {
	v, _ := newConv2d(x, w, b, p, relu)
	return v
}

// newConv2d is conv2d that also returns its op when relu is set, whose
// output a fused pooling reads (recorded or not: under NoGrad the
// Variable has no creator).
func newConv2d(x, w, b *Variable, p ConvParams, relu bool) (*Variable, *conv2dReLUOp) {
	g := newConvGeom(x.Value.Shape(), w.Value.Shape(), p)
	sameDType("Conv2d", x.Value, w.Value)
	if b != nil {
		sameDType("Conv2d", x.Value, b.Value)
		if b.Value.Numel() != g.o {
			panic(fmt.Sprintf("autograd: Conv2d: bias shape %v does not match %d output channels", b.Value.Shape(), g.o))
		}
	}
	xc := x.Value.Contiguous()
	in := ins(x, w)
	if b != nil {
		in = ins(x, w, b)
	}
	op := conv2dOp{inputs: in, x: x, w: w, b: b, xc: xc, g: g}
	s := g.engineShape(g.n)
	if relu {
		y := tensor.Conv2dReLU(xc, w.Value, biasValue(b), &s)
		rop := &conv2dReLUOp{conv2dOp: op, y: y}
		return FromOp(y, rop), rop
	}
	return FromOp(tensor.Conv2d(xc, w.Value, biasValue(b), &s), &op), nil
}

type conv2dOp struct {
	inputs
	x, w, b *Variable
	xc      *tensor.Tensor
	g       convGeom
}

func (o *conv2dOp) Name() string { return "Conv2d" }
func (o *conv2dOp) freshGrads()  {}

// engineShape is g for n samples, in tensor's terms.
func (g *convGeom) engineShape(n int) tensor.Conv2dShape {
	return tensor.Conv2dShape{N: n, C: g.c, H: g.h, W: g.w, O: g.o, KH: g.kh, KW: g.kw,
		StrideH: g.sh, StrideW: g.sw, PadTop: g.ph, PadLeft: g.pw, PadBottom: g.pb, PadRight: g.pr,
		DilationH: g.dh, DilationW: g.dw, Groups: g.groups, OH: g.oh, OW: g.ow, BF16: g.bf16}
}

func (o *conv2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

// backwardInto adds the gradients of the inputs whose Grad buffers the
// engine offers (dst) into them, else returns fresh ones.
func (o *conv2dOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	grads := tensor.Conv2dBackward(gy, o.xc, o.w.Value, o.needs(), at3(dst), new(o.g.engineShape(o.g.n)))
	return grads[:len(o.Inputs())]
}

// needs reports which of dx, dw, db the backward pass wants.
func (o *conv2dOp) needs() [3]bool {
	return [3]bool{needs(o.x), needs(o.w), o.b != nil && needs(o.b)}
}

// at3 is the engine's gradient buffers (up to 3) as an array.
func at3(dst []*tensor.Tensor) (a [3]*tensor.Tensor) {
	copy(a[:], dst)
	return a
}

func biasValue(b *Variable) *tensor.Tensor {
	if b == nil {
		return nil
	}
	return b.Value
}
