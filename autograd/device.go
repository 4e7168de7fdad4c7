package autograd

import (
	"fmt"

	"goddp/tensor"
)

// The device paths of the ops that Linear/MLP training needs, written once
// against tensor.Kernels for every device (goddp/cuda/devtensor fills the
// table for sim and cuda). Each op checks its operands' device in one line
// and comes here when they are not on the host; an op with no device path
// panics with tensor.NoKernel ("Conv2d has no kernel on sim:0"), and
// operands on different devices panic naming both.

// kernels returns the op table of the operands' device (nil on the host),
// panicking when they are on different devices.
func kernels(op string, vs ...*Variable) *tensor.Kernels {
	var ts [4]*tensor.Tensor
	for i, v := range vs {
		if v != nil {
			ts[i] = v.Value
		}
	}
	return tensor.KernelsOf("autograd: "+op, ts[:len(vs)]...)
}

func needKernel(ok bool, op string, t *tensor.Tensor) { tensor.NeedKernel(ok, op, t.Device()) }

// hostOnly is the guard of an op without a device path.
func hostOnly(op string, vs ...*Variable) {
	for _, v := range vs {
		if v != nil {
			tensor.OnCPU(op, v.Value)
		}
	}
}

func zerosLike(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	if t.IsCPU() {
		return tensor.New(t.DType(), shape...)
	}
	return tensor.MustZerosOn(t.Device(), shape...)
}

// linearDevice is Linear's forward on a device: y = b (broadcast), then one
// GEMM with beta = 1, the CPU path's arithmetic.
func linearDevice(k *tensor.Kernels, x, w, b *Variable, outShape []int) *Variable {
	ws := w.Value.Shape()
	needKernel(k.Gemm != nil && k.AddBias != nil, "Linear", x.Value)
	xc := x.Value.Contiguous()
	y := tensor.MustZerosOn(xc.Device(), outShape...)
	n := xc.Numel() / ws[1]
	var beta float32
	if b != nil {
		k.AddBias(y, b.Value)
		beta = 1
	}
	k.Gemm(false, true, n, ws[0], ws[1], 1, xc, ws[1], w.Value, ws[1], beta, y, ws[0])
	in := ins(x, w)
	if b != nil {
		in = ins(x, w, b)
	}
	return FromOp(y, &linearOp{inputs: in, x: x, w: w, b: b, xc: xc, n: n})
}

// linearBwdDevice is linearBwd on a device.
func linearBwdDevice(o *linearOp, gy *tensor.Tensor, dst, grads []*tensor.Tensor) {
	k := tensor.KernelsOf("autograd: Linear backward", gy, o.w.Value)
	needKernel(k.Gemm != nil && k.SumRows != nil && k.Axpy != nil, "Linear backward", gy)
	ws := o.w.Value.Shape()
	out, in, n := ws[0], ws[1], o.n
	into := func(i int, shape ...int) (*tensor.Tensor, float32) {
		if i < len(dst) && dst[i] != nil {
			return dst[i], 1
		}
		grads[i] = tensor.MustZerosOn(gy.Device(), shape...)
		return grads[i], 0
	}
	if needs(o.x) {
		dx, beta := into(0, o.x.Value.Shape()...)
		k.Gemm(false, false, n, in, out, 1, gy, out, o.w.Value, in, beta, dx, in)
	}
	if needs(o.w) {
		dw, beta := into(1, out, in)
		k.Gemm(true, false, out, in, n, 1, gy, out, o.xc, in, beta, dw, in)
	}
	if o.b != nil && needs(o.b) {
		db, beta := into(2, out)
		g2 := gy.Reshape(n, out)
		if beta == 0 {
			k.SumRows(db, g2)
		} else {
			s := tensor.MustZerosOn(gy.Device(), out)
			k.SumRows(s, g2)
			k.Axpy(db, 1, s)
		}
	}
}

// scaledGradOp is the backward of a loss whose gradient the forward kernel
// already computed (cross-entropy, MSE): grad times the upstream scalar gy,
// read on the device. Inputs past the first get -grad (MSE's target).
type scaledGradOp struct {
	inputs
	name string
	grad *tensor.Tensor
}

func (o *scaledGradOp) Name() string { return o.name }
func (o *scaledGradOp) freshGrads()  {}

func (o *scaledGradOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	k := tensor.KernelsOf("autograd: "+o.name+" backward", gy, o.grad)
	needKernel(k.Copy != nil && k.ScaleBy != nil && k.Scale != nil, o.name+" backward", o.grad)
	in := o.Inputs()
	grads := make([]*tensor.Tensor, len(in))
	g := tensor.MustZerosOn(o.grad.Device(), o.grad.Shape()...)
	k.Copy(g, o.grad)
	k.ScaleBy(g, gy)
	if needs(in[0]) {
		grads[0] = g
	}
	if len(in) > 1 && needs(in[1]) {
		neg := tensor.MustZerosOn(g.Device(), g.Shape()...)
		k.Scale(neg, g, -1)
		grads[1] = neg
	}
	return grads
}

// crossEntropyDevice is CrossEntropy on a device: torch's defaults (mean or
// sum, no ignored targets, no label smoothing), loss and gradient in one
// kernel.
func crossEntropyDevice(logits *Variable, target []int, o CrossEntropyOptions) *Variable {
	k := kernels("CrossEntropy", logits)
	x := logits.Value
	needKernel(k.SoftmaxCrossEntropy != nil, "CrossEntropy", x)
	if o.Reduction == ReductionNone || o.LabelSmoothing != 0 {
		panic(tensor.NoKernel(fmt.Sprintf("CrossEntropy with reduction %v and label smoothing %v", o.Reduction, o.LabelSmoothing), x.Device()))
	}
	for i, t := range target {
		if t == o.ignoreIndex() {
			panic(tensor.NoKernel(fmt.Sprintf("CrossEntropy with an ignored target (target[%d])", i), x.Device()))
		}
	}
	n, c := x.Size(0), x.Size(1)
	scale := float32(1)
	if o.Reduction == ReductionMean {
		scale = 1 / float32(n)
	}
	grad := tensor.MustZerosOn(x.Device(), n, c)
	y := tensor.MustZerosOn(x.Device())
	k.SoftmaxCrossEntropy(grad, y, x.Contiguous(), target, scale)
	return FromOp(y, &scaledGradOp{inputs: ins(logits), name: "CrossEntropy", grad: grad})
}

// mseDevice is MSELoss on a device (mean or sum).
func mseDevice(pred, target *Variable, reduction Reduction) *Variable {
	k := kernels("MSELoss", pred, target)
	p := pred.Value
	needKernel(k.MSE != nil, "MSELoss", p)
	if reduction == ReductionNone {
		panic(tensor.NoKernel("MSELoss with reduction none", p.Device()))
	}
	n := p.Numel()
	gs, ls := float32(2), float32(1)
	if reduction == ReductionMean {
		gs, ls = 2/float32(n), 1/float32(n)
	}
	grad := tensor.MustZerosOn(p.Device(), p.Shape()...)
	y := tensor.MustZerosOn(p.Device())
	k.MSE(grad, y, p.Contiguous(), target.Value.Contiguous(), gs, ls)
	return FromOp(y, &scaledGradOp{inputs: ins(pred, target), name: "MSELoss", grad: grad})
}

// sumAllDevice is SumAll (scale 1) and MeanAll (scale 1/n) on a device.
func sumAllDevice(a *Variable, scale float64, name string) *Variable {
	k := kernels(name, a)
	x := a.Value.Contiguous()
	needKernel(k.SumAll != nil && k.Scale != nil && k.Fill != nil && k.ScaleBy != nil, name, x)
	y := tensor.MustZerosOn(x.Device())
	k.SumAll(y, x)
	if scale != 1 {
		k.Scale(y, y, float32(scale))
	}
	return FromOp(y, &sumAllDeviceOp{inputs: ins(a), scale: float32(scale), name: name})
}

type sumAllDeviceOp struct {
	inputs
	scale float32
	name  string
}

func (o *sumAllDeviceOp) Name() string { return o.name }
func (o *sumAllDeviceOp) freshGrads()  {}

func (o *sumAllDeviceOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	k := tensor.KernelsOf("autograd: "+o.name+" backward", gy)
	gx := tensor.MustZerosOn(gy.Device(), o.in(0).Value.Shape()...)
	k.Fill(gx, o.scale)
	k.ScaleBy(gx, gy)
	return []*tensor.Tensor{gx}
}

// logSoftmaxDevice is LogSoftmax over the last dimension on a device.
func logSoftmaxDevice(a *Variable, axis int) *Variable {
	k := kernels("LogSoftmax", a)
	x := a.Value.Contiguous()
	needKernel(k.LogSoftmax != nil && k.LogSoftmaxBackward != nil, "LogSoftmax", x)
	if normAxis("LogSoftmax", axis, x.Dim()) != x.Dim()-1 {
		panic(tensor.NoKernel("LogSoftmax over a dimension other than the last", x.Device()))
	}
	y := tensor.MustZerosOn(x.Device(), x.Shape()...)
	k.LogSoftmax(y, x)
	return FromOp(y, &logSoftmaxDeviceOp{inputs: ins(a), y: y})
}

type logSoftmaxDeviceOp struct {
	inputs
	y *tensor.Tensor
}

func (o *logSoftmaxDeviceOp) Name() string { return "LogSoftmax" }
func (o *logSoftmaxDeviceOp) freshGrads()  {}

func (o *logSoftmaxDeviceOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	k := tensor.KernelsOf("autograd: LogSoftmax backward", gy, o.y)
	gx := tensor.MustZerosOn(gy.Device(), gy.Shape()...)
	k.LogSoftmaxBackward(gx, gy.Contiguous(), o.y)
	return []*tensor.Tensor{gx}
}
