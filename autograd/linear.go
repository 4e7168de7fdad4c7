package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Linear returns x @ wᵀ + b for x [..., in], w [out, in] and b [out] (b may be
// nil), as torch.nn.functional.linear. The forward is one GEMM with the bias
// folded in (the output rows start as b and the GEMM runs with beta = 1).
//
// Backward is three GEMM-shaped kernels: dX = gy @ W, dW = gyᵀ @ x and db =
// column sums of gy. When w or b already has a Grad buffer, dW and db are
// accumulated straight into it, so a training step makes no parameter-sized
// temporaries; dX is skipped when x needs no gradient (the first layer).
func Linear(x, w, b *Variable) *Variable { return LinearWith(x, w, b, tensor.PrecisionFloat32) }

// LinearWith is Linear whose products, forward and backward, run in
// precision p: tensor.PrecisionBFloat16 is autocast's bf16 linear (the
// operands rounded to bfloat16, float32 accumulation, a float32 result).
// Parameters and gradients stay float32.
func LinearWith(x, w, b *Variable, p tensor.Precision) *Variable {
	xs, ws := x.Value.Shape(), w.Value.Shape()
	if len(ws) != 2 || len(xs) < 1 || xs[len(xs)-1] != ws[1] {
		panic(fmt.Sprintf("autograd: Linear: input shape %v does not match weight shape %v", xs, ws))
	}
	if b != nil && (b.Value.Dim() != 1 || b.Value.Size(0) != ws[0]) {
		panic(fmt.Sprintf("autograd: Linear: bias shape %v does not match weight shape %v", b.Value.Shape(), ws))
	}
	sameDType("Linear", x.Value, w.Value)
	if b != nil {
		sameDType("Linear", x.Value, b.Value)
	}
	var bias *tensor.Tensor
	if b != nil {
		bias = b.Value
	}
	xc := x.Value.Contiguous()
	in := ins(x, w)
	if b != nil {
		in = ins(x, w, b)
	}
	if p == tensor.PrecisionBFloat16 {
		// The backward's products take x and w rounded to bfloat16: the
		// forward's roundings are kept for them (xh, wh), and x itself only
		// where the product does not round on the host.
		y, xh, wh := tensor.LinearBF16(xc, w.Value, bias)
		op := &linearOp{inputs: in, x: x, w: w, b: b, xh: xh, wh: wh, prec: p}
		if xh == nil {
			op.xc = xc
		}
		return FromOp(y, op)
	}
	y := tensor.LinearWith(xc, w.Value, bias, p)
	return FromOp(y, &linearOp{inputs: in, x: x, w: w, b: b, xc: xc, prec: p})
}

// LinearGELU returns GELU(LinearWith(x, w, b, p)), torch's
// F.gelu(F.linear(x, w, b)), as one op where both run on the host in
// float32 (the Linear in precision p): the GELU runs in place on the
// Linear's output and keeps its derivative, and the backward forms the
// Linear's output gradient, gy times that derivative, in the pass that
// sums the bias gradient and, for bf16 products, rounds it
// (tensor.LinearBackwardGated). A transformer's MLP so makes one pass less
// over its widest gradient, and two less under bf16. The values and
// gradients are the two ops' to the bit; elsewhere (a device, float64, no
// gradient) it is the two ops.
func LinearGELU(x, w, b *Variable, p tensor.Precision) *Variable {
	y := LinearWith(x, w, b, p)
	op, ok := y.creator.(*linearOp)
	if !ok {
		return GELU(y)
	}
	// LinearWith's own output: the GELU may overwrite it.
	if op.gate = tensor.GELUInPlaceWithGrad(y.Value); op.gate == nil {
		return GELU(y)
	}
	return y
}

type linearOp struct {
	inputs
	x, w, b *Variable
	xc      *tensor.Tensor     // x's value, contiguous (nil when xh holds it)
	xh, wh  *tensor.BF16Matrix // x and w rounded to bfloat16 (bf16 products on the host)
	prec    tensor.Precision
	gate    *tensor.Tensor // LinearGELU: the GELU's derivative at the Linear's output
}

func (o *linearOp) Name() string {
	if o.gate != nil {
		return "LinearGELU"
	}
	return "Linear"
}
func (o *linearOp) freshGrads() {}

// savedTensors lets FreeGraph recycle the rounded input and weight, and
// LinearGELU's derivative, with the graph.
func (o *linearOp) savedTensors() []*tensor.Tensor {
	var saved []*tensor.Tensor
	if o.xh != nil {
		saved = append(saved, o.xh.Storage(), o.wh.Storage())
	}
	if o.gate != nil {
		saved = append(saved, o.gate)
	}
	return saved
}

func (o *linearOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

func (o *linearOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, len(o.Inputs()))
	// into returns the buffer of input i's gradient: the caller's (dst, added
	// to) or a fresh one handed back in grads, which LinearBackwardWith
	// overwrites whole (GEMMs with beta 0, the bias sums cleared first), so
	// it is not zeroed.
	into := func(i int, shape ...int) (*tensor.Tensor, bool) {
		if i < len(dst) && dst[i] != nil {
			return dst[i], true
		}
		grads[i] = tensor.EmptyAs(gy, shape...)
		return grads[i], false
	}
	var dx, dw, db *tensor.Tensor
	var accX, accW, accB bool
	if needs(o.x) {
		dx, accX = into(0, o.x.Value.Shape()...)
	}
	if needs(o.w) {
		dw, accW = into(1, o.w.Value.Shape()...)
	}
	if o.b != nil && needs(o.b) {
		db, accB = into(2, o.b.Value.Shape()...)
	}
	if o.gate != nil {
		tensor.LinearBackwardGated(gy, o.gate, o.xc, o.xh, o.wh, o.w.Value, dx, dw, db, accX, accW, accB, o.prec)
		return grads
	}
	if o.prec == tensor.PrecisionBFloat16 {
		tensor.LinearBackwardBF16(gy, o.xc, o.xh, o.wh, o.w.Value, dx, dw, db, accX, accW, accB)
		return grads
	}
	tensor.LinearBackwardWith(gy, o.xc, o.w.Value, dx, dw, db, accX, accW, accB, o.prec)
	return grads
}
