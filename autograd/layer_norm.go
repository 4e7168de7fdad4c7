package autograd

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// LayerNorm normalizes x over its trailing dimensions to zero mean and unit
// (biased) variance, then applies the elementwise affine w and b, as
// torch.nn.functional.layer_norm. The normalized shape is w's shape (or b's);
// when both are nil it is x's last dimension. Backward accumulates dw and db
// straight into existing Grad buffers.
func LayerNorm(x, w, b *Variable, eps float64) *Variable {
	xs := x.Value.Shape()
	var norm []int
	switch {
	case w != nil:
		norm = w.Value.Shape()
	case b != nil:
		norm = b.Value.Shape()
	case len(xs) > 0:
		norm = xs[len(xs)-1:]
	}
	if len(norm) == 0 || len(norm) > len(xs) || !slices.Equal(norm, xs[len(xs)-len(norm):]) {
		panic(fmt.Sprintf("autograd: LayerNorm: input shape %v does not end with normalized shape %v", xs, norm))
	}
	if w != nil && b != nil && !slices.Equal(w.Value.Shape(), b.Value.Shape()) {
		panic(fmt.Sprintf("autograd: LayerNorm: weight shape %v does not match bias shape %v", w.Value.Shape(), b.Value.Shape()))
	}
	d := 1
	for _, v := range norm {
		d *= v
	}
	xc := x.Value.Contiguous()
	rows := xc.Numel() / d
	if y, xhat, rstd := tensor.LayerNormDevice(xc, value(w), value(b), d, eps); y != nil {
		return FromOp(y, &layerNormOp{inputs: ins(x, w, b), d: d, rows: rows, xhat: xhat, rstdDev: rstd})
	}
	// The op keeps x and each row's mean and rstd, as torch's layer_norm
	// does, and its backward recomputes xhat from them (to the same bits):
	// keeping xhat cost an activation-sized tensor per LayerNorm until the
	// backward, and a third of the forward's memory traffic. y is written
	// whole (Empty: no zeroing first).
	o := &layerNormOp{inputs: ins(x, w, b), d: d, rows: rows, xc: xc,
		mean: make([]float64, rows), rstd: make([]float64, rows)}
	y := tensor.Empty(xc.DType(), xs...)
	if xc.DType() == tensor.Float64 {
		tensor.LayerNormRowsStats(y.F64(), o.mean, o.rstd, xc.F64(), affine[float64](w), affine[float64](b), rows, d, eps)
	} else {
		tensor.LayerNormRowsStats(y.F32(), o.mean, o.rstd, xc.F32(), affine[float32](w), affine[float32](b), rows, d, eps)
	}
	return FromOp(y, o)
}

// affine returns the data of an optional affine parameter.
func affine[T float](v *Variable) []T {
	if v == nil {
		return nil
	}
	return data[T](v.Value)
}

type layerNormOp struct {
	inputs  // x, w (may be nil), b (may be nil)
	d, rows int
	xc      *tensor.Tensor // host: x, contiguous
	mean    []float64      // host: the mean per row
	rstd    []float64      // host: 1/sqrt(var+eps) per row
	xhat    *tensor.Tensor // device: the normalized input
	rstdDev *tensor.Tensor // device: rstd; nil on the host
}

func (o *layerNormOp) Name() string { return "LayerNorm" }
func (o *layerNormOp) freshGrads()  {}

// savedTensors: what the op kept for backward goes back to the cache with
// the graph (FreeGraph): the normalized input and rstd on a device, and on the
// host x's contiguous copy when x was not contiguous (FreeGraph keeps x's
// own storage when the caller holds x).
func (o *layerNormOp) savedTensors() []*tensor.Tensor {
	return []*tensor.Tensor{o.xhat, o.rstdDev, o.xc}
}

func (o *layerNormOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *layerNormOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	if o.rstdDev != nil {
		return o.backwardDevice(gy, dst)
	}
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 3)
	if gy.DType() == tensor.Float64 {
		layerNormBwd[float64](o, gy, dst, grads)
	} else {
		layerNormBwd[float32](o, gy, dst, grads)
	}
	return grads
}

// paramGrad returns where to accumulate the gradient of input i of shape:
// the Grad buffer the engine offered, or a new zeroed tensor in grads.
func paramGrad[T float](i int, dst, grads []*tensor.Tensor, dt tensor.DType, shape []int) []T {
	if i < len(dst) && dst[i] != nil {
		return data[T](dst[i])
	}
	grads[i] = tensor.New(dt, shape...)
	return data[T](grads[i])
}

func layerNormBwd[T float](o *layerNormOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	x, w, b := o.in(0), o.in(1), o.in(2)
	var wd, dw, db []T
	if w != nil {
		wd = data[T](w.Value)
		if needs(w) {
			dw = paramGrad[T](1, dst, grads, gyT.DType(), w.Value.Shape())
		}
	}
	if needs(b) {
		db = paramGrad[T](2, dst, grads, gyT.DType(), b.Value.Shape())
	}
	var dx []T
	if needs(x) {
		grads[0] = tensor.Empty(gyT.DType(), x.Value.Shape()...) // written whole
		dx = data[T](grads[0])
	}
	tensor.LayerNormRowsBackwardFromX(dx, dw, db, data[T](gyT), data[T](o.xc), wd, o.mean, o.rstd, o.rows, o.d)
}
