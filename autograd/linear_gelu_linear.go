package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// LinearGELULinear returns LinearWith(GELU(LinearWith(x, w1, b1, p)), w2,
// b2, p): torch's fc2(F.gelu(fc1(x))), a transformer's MLP. Under bf16
// products on the host it is one op whose GELU is rounded to bfloat16 as
// it is computed, since the second Linear reads only that rounding: the
// float32 GELU is never stored, nor read again to round it. The backward
// runs both Linears' backwards, the first as LinearGELU's (the GELU's
// derivative folded into the pass that rounds its output gradient). The
// values and gradients are the three ops' to the bit. Elsewhere (float32
// products, a device, float64, a missing bias) it is LinearGELU and then
// LinearWith.
func LinearGELULinear(x, w1, b1, w2, b2 *Variable, p tensor.Precision) *Variable {
	if p != tensor.PrecisionBFloat16 || b1 == nil || b2 == nil {
		return LinearWith(LinearGELU(x, w1, b1, p), w2, b2, p)
	}
	h := LinearWith(x, w1, b1, p)
	hs, ws2 := h.Value.Shape(), w2.Value.Shape()
	if len(ws2) != 2 || ws2[1] != hs[len(hs)-1] || b2.Value.Dim() != 1 || b2.Value.Size(0) != ws2[0] {
		panic(fmt.Sprintf("autograd: LinearGELULinear: second weight %v and bias %v do not take the first Linear's output %v",
			ws2, b2.Value.Shape(), hs))
	}
	sameDType("LinearGELULinear", h.Value, w2.Value)
	sameDType("LinearGELULinear", h.Value, b2.Value)
	l1, ok := h.creator.(*linearOp)
	if !ok || l1.xh == nil { // no gradient to keep, or not rounded on the host
		return LinearWith(GELU(h), w2, b2, p)
	}
	hh, gate := tensor.GELUToBF16WithGrad(h.Value)
	if hh == nil {
		return LinearWith(GELU(h), w2, b2, p)
	}
	tensor.ReleaseScratch(h.Value) // only its rounding is read from here on
	y, wh2 := tensor.LinearBF16Rounded(hh, w2.Value, b2.Value)
	op := &mlpOp{x: x, w1: w1, b1: b1, w2: w2, b2: b2, xh1: l1.xh, wh1: l1.wh, hh: hh, wh2: wh2, gate: gate}
	op.more = []*Variable{x, w1, b1, w2, b2}
	return FromOp(y.Reshape(append(cloneInts(hs[:len(hs)-1]), ws2[0])...), op)
}

// mlpOp is LinearGELULinear's op under bf16 products on the host.
type mlpOp struct {
	inputs
	x, w1, b1, w2, b2 *Variable
	xh1, wh1, wh2     *tensor.BF16Matrix // the Linears' rounded input and weights
	hh                *tensor.BF16Matrix // the GELU's output, rounded: the second Linear's input
	gate              *tensor.Tensor     // the GELU's derivative [rows, hidden]
}

func (o *mlpOp) Name() string { return "LinearGELULinear" }
func (o *mlpOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the roundings and the derivative.
func (o *mlpOp) savedTensors() []*tensor.Tensor {
	return []*tensor.Tensor{o.xh1.Storage(), o.wh1.Storage(), o.hh.Storage(), o.wh2.Storage(), o.gate}
}

func (o *mlpOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

// backwardInto follows linearOp's: a gradient goes into the buffer the
// engine offers (added to), or into a fresh one handed back.
func (o *mlpOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 5)
	into := func(i int, v *Variable) (*tensor.Tensor, bool) {
		if !needs(v) {
			return nil, false
		}
		if i < len(dst) && dst[i] != nil {
			return dst[i], true
		}
		grads[i] = tensor.EmptyAs(gy, v.Value.Shape()...)
		return grads[i], false
	}
	dx, accX := into(0, o.x)
	dw1, accW1 := into(1, o.w1)
	db1, accB1 := into(2, o.b1)
	dw2, accW2 := into(3, o.w2)
	db2, accB2 := into(4, o.b2)
	// The GELU output's gradient: x, w1 or b1 needs one, or the first
	// Linear would have recorded no op and LinearGELULinear made none.
	dh := tensor.EmptyAs(gy, o.gate.Shape()...)
	tensor.LinearBackwardBF16(gy, nil, o.hh, o.wh2, o.w2.Value, dh, dw2, db2, false, accW2, accB2)
	tensor.LinearBackwardGated(dh, o.gate, nil, o.xh1, o.wh1, o.w1.Value, dx, dw1, db1, accX, accW1, accB1, tensor.PrecisionBFloat16)
	tensor.ReleaseScratch(dh)
	return grads
}
