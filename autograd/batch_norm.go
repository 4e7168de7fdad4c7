package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// BatchNorm normalizes x [N, C, *] per channel C, as
// torch.nn.functional.batch_norm. In training it uses the batch statistics
// (biased variance) and, when runMean and runVar are non-nil, updates them in
// place: run = (1-momentum)*run + momentum*stat, with the unbiased variance
// for runVar as torch does. In evaluation it normalizes with runMean and
// runVar, which must then be given. w and b ([C]) may be nil.
//
// Training needs more than one value per channel; fewer panics, as torch
// raises.
func BatchNorm(x, w, b *Variable, runMean, runVar *tensor.Tensor, training bool, momentum, eps float64) *Variable {
	n, c, l := checkBatchNorm("BatchNorm", x, w, b, runMean, runVar)
	if !training && runMean == nil {
		panic("autograd: BatchNorm: evaluation mode needs running statistics")
	}
	if training && n*l <= 1 {
		panic(fmt.Sprintf("autograd: BatchNorm: expected more than 1 value per channel when training, got input shape %v", x.Value.Shape()))
	}
	return batchNorm("BatchNorm", x, w, b, runMean, runVar, n, c, l, training, momentum, eps, nil, nil)
}

// checkBatchNorm validates BatchNorm's and SyncBatchNorm's operands and
// returns x's [n, c, l] (l the product of the spatial dimensions).
func checkBatchNorm(name string, x, w, b *Variable, runMean, runVar *tensor.Tensor) (n, c, l int) {
	xs := x.Value.Shape()
	if len(xs) < 2 {
		panic(fmt.Sprintf("autograd: %s: input shape %v, want [N, C, *]", name, xs))
	}
	n, c = xs[0], xs[1]
	for _, p := range []*tensor.Tensor{runMean, runVar, value(w), value(b)} {
		if p != nil && (p.Numel() != c || p.DType() != x.Value.DType()) {
			panic(fmt.Sprintf("autograd: %s: parameter or buffer %v %v does not match %d channels of %v input %v", name, p.DType(), p.Shape(), c, x.Value.DType(), xs))
		}
	}
	if (runMean == nil) != (runVar == nil) {
		panic(fmt.Sprintf("autograd: %s: give both running mean and running variance, or neither", name))
	}
	return n, c, x.Value.Numel() / max(n*c, 1)
}

func value(v *Variable) *tensor.Tensor {
	if v == nil {
		return nil
	}
	return v.Value
}

// batchNorm records BatchNorm (fwd and bwd nil) or SyncBatchNorm, whose
// fwd and bwd sum the statistics and the gradient sums across replicas.
func batchNorm(name string, x, w, b *Variable, rm, rv *tensor.Tensor, n, c, l int, training bool, momentum, eps float64,
	fwd, bwd func(*tensor.Tensor) error) *Variable {
	y, st, err := tensor.BatchNormForward(x.Value, value(w), value(b), rm, rv, n, c, l, training, momentum, eps, fwd)
	if err != nil {
		panic(fmt.Errorf("autograd: %s: %w", name, err))
	}
	return FromOp(y, &batchNormOp{inputs: ins(x, w, b), name: name, st: st, reduce: bwd})
}

// batchNormOp keeps the forward's state on the op's device: the
// normalized input, (mean, rstd) per channel and the statistics.
type batchNormOp struct {
	inputs // x, w (may be nil), b (may be nil)
	name   string
	st     *tensor.BatchNormState
	reduce func(*tensor.Tensor) error // SyncBatchNorm's sum across replicas; nil for BatchNorm
}

func (o *batchNormOp) Name() string { return o.name }
func (o *batchNormOp) freshGrads()  {}

// savedTensors: the normalized input goes back to the cache with the graph.
func (o *batchNormOp) savedTensors() []*tensor.Tensor { return []*tensor.Tensor{o.st.Xhat} }

func (o *batchNormOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

// backwardInto adds dw and db into the Grad buffers the engine offers
// (dst), else into new zeroed tensors.
func (o *batchNormOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	x, w, b := o.in(0), o.in(1), o.in(2)
	grads, dw, db := affineGrads(gy, dst, w, b)
	dx, err := tensor.BatchNormBackward(gy, o.st, value(w), dw, db, needs(x), o.reduce)
	if err != nil {
		panic(fmt.Errorf("autograd: %s backward: %w", o.name, err))
	}
	grads[0] = dx
	return grads
}
