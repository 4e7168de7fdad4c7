package gpt2

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// conv1D returns x·w + b for x [..., in], w [in, out] and b [out] as one
// op whose products read w in its stored layout: the forward is one GEMM
// on rows that start as b (beta = 1, torch's addmm(b, x, w)), the backward
// dx = gy·wᵀ, dw = xᵀ·gy and db = the column sums of gy, with dw and db
// added straight into existing Grad buffers. No transposed copy of the
// weight or of its gradient is made: at GPT-2 124M those were 340 MB
// alive through each step and 340 MB of garbage after it. It returns nil
// where it does not apply (a device, bf16 products, mixed dtypes), for
// the caller's transposed Linear.
func conv1D(x, w, b *autograd.Variable, p tensor.Precision) *autograd.Variable {
	xv, wv := x.Value, w.Value
	dt := xv.DType()
	if p == tensor.PrecisionBFloat16 || !xv.IsCPU() || !wv.IsCPU() || (b != nil && !b.Value.IsCPU()) ||
		(dt != tensor.Float32 && dt != tensor.Float64) || wv.DType() != dt || (b != nil && b.Value.DType() != dt) {
		return nil
	}
	xs, ws := xv.Shape(), wv.Shape()
	if len(ws) != 2 || len(xs) < 1 || xs[len(xs)-1] != ws[0] {
		panic(fmt.Sprintf("gpt2: Conv1D: input shape %v does not match weight shape %v ([in, out])", xs, ws))
	}
	in, out := ws[0], ws[1]
	if b != nil && (b.Value.Dim() != 1 || b.Value.Size(0) != out) {
		panic(fmt.Sprintf("gpt2: Conv1D: bias shape %v does not match weight shape %v ([in, out])", b.Value.Shape(), ws))
	}
	xc := xv.Contiguous()
	n := xc.Numel() / max(in, 1)
	shape := slices.Clone(xs)
	shape[len(shape)-1] = out
	var y *tensor.Tensor
	if b == nil || in == 0 {
		y = tensor.New(dt, shape...) // beta 0 writes it whole, unless there is no product
	} else {
		y = tensor.Empty(dt, shape...) // the bias rows write it whole
	}
	var bc *tensor.Tensor
	if b != nil {
		bc = b.Value.Contiguous()
	}
	if dt == tensor.Float64 {
		var bias []float64
		if bc != nil {
			bias = bc.F64()
		}
		conv1DForward(y.F64(), xc.F64(), wv.Contiguous().F64(), bias, n, in, out, tensor.Gemm64)
	} else {
		var bias []float32
		if bc != nil {
			bias = bc.F32()
		}
		conv1DForward(y.F32(), xc.F32(), wv.Contiguous().F32(), bias, n, in, out, tensor.Gemm)
	}
	op := &conv1DOp{x: x, w: w, b: b, xc: xc, copied: xc != xv}
	op.in = []*autograd.Variable{x, w}
	if b != nil {
		op.in = append(op.in, b)
	}
	return autograd.FromOp(y, op)
}

type gemmFunc[T float32 | float64] func(transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)

// conv1DForward writes y [n, out] = b + x·w for x [n, in], w [in, out].
func conv1DForward[T float32 | float64](y, x, w, b []T, n, in, out int, gemm gemmFunc[T]) {
	var beta T
	if b != nil {
		for i := range n {
			copy(y[i*out:(i+1)*out], b[:out])
		}
		beta = 1
	}
	gemm(false, false, n, out, in, 1, x, in, w, out, beta, y, out)
}

type conv1DOp struct {
	in      []*autograd.Variable
	x, w, b *autograd.Variable
	xc      *tensor.Tensor // x's value, contiguous
	copied  bool           // xc is a copy the forward made (x was strided)
}

func (o *conv1DOp) Name() string                 { return "gpt2.Conv1D" }
func (o *conv1DOp) Inputs() []*autograd.Variable { return o.in }

// FreshGrads: the gradients are new tensors (autograd recycles them).
func (o *conv1DOp) FreshGrads() {}

// SavedTensors lets the graph's owner recycle x's contiguous copy, when
// the forward made one.
func (o *conv1DOp) SavedTensors() []*tensor.Tensor {
	if o.copied {
		return []*tensor.Tensor{o.xc}
	}
	return nil
}

func (o *conv1DOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.BackwardInto(gy, nil) }

// BackwardInto implements autograd.GradAccumulator: a dst entry (an input's
// Grad) gets its gradient added by the GEMM (beta 1) or the row sums.
func (o *conv1DOp) BackwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, len(o.in))
	into := func(i int, shape []int) (*tensor.Tensor, bool) {
		if i < len(dst) && dst[i] != nil {
			return dst[i], true
		}
		grads[i] = tensor.Empty(gy.DType(), shape...) // overwritten whole below
		return grads[i], false
	}
	var dx, dw, db *tensor.Tensor
	var accX, accW, accB bool
	if o.x.RequiresGrad() {
		dx, accX = into(0, o.x.Value.Shape())
	}
	if o.w.RequiresGrad() {
		dw, accW = into(1, o.w.Value.Shape())
	}
	if o.b != nil && o.b.RequiresGrad() {
		db, accB = into(2, o.b.Value.Shape())
	}
	ws := o.w.Value.Shape()
	in, out := ws[0], ws[1]
	n := gy.Numel() / max(out, 1)
	if gy.DType() == tensor.Float64 {
		conv1DBackward(gy.F64(), o.xc.F64(), o.w.Value.Contiguous().F64(), dx, dw, db, accX, accW, accB, n, in, out, (*tensor.Tensor).F64, tensor.Gemm64)
	} else {
		conv1DBackward(gy.F32(), o.xc.F32(), o.w.Value.Contiguous().F32(), dx, dw, db, accX, accW, accB, n, in, out, (*tensor.Tensor).F32, tensor.Gemm)
	}
	return grads
}

// conv1DBackward writes (or adds, under acc) dx = gy·wᵀ, dw = xᵀ·gy and db
// = Σ rows of gy; a nil one is skipped.
func conv1DBackward[T float32 | float64](gy, x, w []T, dx, dw, db *tensor.Tensor, accX, accW, accB bool, n, in, out int,
	data func(*tensor.Tensor) []T, gemm gemmFunc[T]) {
	beta := func(acc bool) T {
		if acc {
			return 1
		}
		return 0
	}
	if dx != nil {
		gemm(false, true, n, in, out, 1, gy, out, w, out, beta(accX), data(dx), in)
	}
	if dw != nil {
		gemm(true, false, in, out, n, 1, x, in, gy, out, beta(accW), data(dw), out)
	}
	if db != nil {
		d := data(db)[:out]
		if !accB {
			clear(d)
		}
		tensor.AddRows(d, gy[:n*out], n, out)
	}
}
