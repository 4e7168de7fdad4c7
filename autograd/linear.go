package autograd

import (
	"fmt"

	"goddp/tensor"
)

// Linear returns x @ wᵀ + b for x [..., in], w [out, in] and b [out] (b may be
// nil), as torch.nn.functional.linear. The forward is one GEMM with the bias
// folded in (the output rows start as b and the GEMM runs with beta = 1).
//
// Backward is three GEMM-shaped kernels: dX = gy @ W, dW = gyᵀ @ x and db =
// column sums of gy. When w or b already has a Grad buffer, dW and db are
// accumulated straight into it, so a training step makes no parameter-sized
// temporaries; dX is skipped when x needs no gradient (the first layer).
func Linear(x, w, b *Variable) *Variable {
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
	outShape := cloneInts(xs)
	outShape[len(outShape)-1] = ws[0]
	if !x.Value.IsCPU() || !w.Value.IsCPU() || (b != nil && !b.Value.IsCPU()) {
		return linearDevice(kernels("Linear", x, w, b), x, w, b, outShape)
	}
	xc := x.Value.Contiguous()
	y := tensor.New(xc.DType(), outShape...)
	n := xc.Numel() / ws[1]
	if xc.DType() == tensor.Float64 {
		linearFwd(y.F64(), xc.F64(), data[float64](w.Value), biasData[float64](b), n, ws[1], ws[0])
	} else {
		linearFwd(y.F32(), xc.F32(), data[float32](w.Value), biasData[float32](b), n, ws[1], ws[0])
	}
	in := ins(x, w)
	if b != nil {
		in = ins(x, w, b)
	}
	return FromOp(y, &linearOp{inputs: in, x: x, w: w, b: b, xc: xc, n: n})
}

func biasData[T float](b *Variable) []T {
	if b == nil {
		return nil
	}
	return data[T](b.Value)
}

func linearFwd[T float](y, x, w, b []T, n, in, out int) {
	var beta T
	if b != nil {
		for r := 0; r < n; r++ {
			copy(y[r*out:(r+1)*out], b)
		}
		beta = 1
	}
	gemm(false, true, n, out, in, 1, x, in, w, in, beta, y, out)
}

type linearOp struct {
	inputs
	x, w, b *Variable
	xc      *tensor.Tensor // x's value, contiguous
	n       int            // rows of the flattened input
}

func (o *linearOp) Name() string { return "Linear" }
func (o *linearOp) freshGrads()  {}

func (o *linearOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

func (o *linearOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, len(o.Inputs()))
	if !gy.IsCPU() {
		linearBwdDevice(o, gy, dst, grads)
		return grads
	}
	if gy.DType() == tensor.Float64 {
		linearBwd[float64](o, gy, dst, grads)
	} else {
		linearBwd[float32](o, gy, dst, grads)
	}
	return grads
}

func linearBwd[T float](o *linearOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	ws := o.w.Value.Shape()
	out, in, n := ws[0], ws[1], o.n
	gy := data[T](gyT)
	into := func(k int, shape ...int) ([]T, T) {
		if k < len(dst) && dst[k] != nil {
			return data[T](dst[k]), 1
		}
		grads[k] = tensor.New(gyT.DType(), shape...)
		return data[T](grads[k]), 0
	}
	if needs(o.x) {
		dx, beta := into(0, o.x.Value.Shape()...)
		gemm(false, false, n, in, out, 1, gy, out, data[T](o.w.Value), in, beta, dx, in)
	}
	if needs(o.w) {
		dw, beta := into(1, out, in)
		gemm(true, false, out, in, n, 1, gy, out, data[T](o.xc), in, beta, dw, in)
	}
	if o.b != nil && needs(o.b) {
		db, beta := into(2, out)
		if beta == 0 {
			clear(db)
		}
		colSums(db, gy, n, out)
	}
}

// colSums adds the column sums of the row-major [rows, cols] matrix m into dst.
func colSums[T float](dst, m []T, rows, cols int) {
	dst = dst[:cols]
	for r := 0; r < rows; r++ {
		row := m[r*cols : (r+1)*cols]
		for c, v := range row {
			dst[c] += v
		}
	}
}
