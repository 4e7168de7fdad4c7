package autograd

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/tensor"
)

// SumAcrossReplicas sums buf elementwise across every replica of a
// distributed job, in place (an all-reduce with Sum). SyncBatchNorm calls it
// once in forward and once in backward; every replica must take part in the
// same calls, in the same order.
type SumAcrossReplicas func(buf []float64) error

// SyncBatchNorm is BatchNorm in training mode with the batch statistics of
// every replica together, as torch.nn.SyncBatchNorm: forward all-reduces
// each channel's sum, sum of squares and count, so the mean and (biased)
// variance are those of the concatenated batch, and the running statistics
// are updated from them (the unbiased variance uses the global count).
// Backward all-reduces each channel's sum(gy) and sum(gy*xhat) for the input
// gradient; the weight and bias gradients stay local, as in torch (DDP
// averages them). x is [N, C, *]; w, b ([C]) and the running statistics may
// be nil. A failed all-reduce panics with the error: forward and backward
// have no error result, and the replicas can no longer agree.
func SyncBatchNorm(x, w, b *Variable, runMean, runVar *tensor.Tensor, momentum, eps float64, sum SumAcrossReplicas) *Variable {
	xs := x.Value.Shape()
	if len(xs) < 2 {
		panic(fmt.Sprintf("autograd: SyncBatchNorm: input shape %v, want [N, C, *]", xs))
	}
	c := xs[1]
	for _, p := range []*tensor.Tensor{runMean, runVar, value(w), value(b)} {
		if p != nil && (p.Numel() != c || p.DType() != x.Value.DType()) {
			panic(fmt.Sprintf("autograd: SyncBatchNorm: parameter or buffer %v %v does not match %d channels of %v input %v", p.DType(), p.Shape(), c, x.Value.DType(), xs))
		}
	}
	if (runMean == nil) != (runVar == nil) {
		panic("autograd: SyncBatchNorm: give both running mean and running variance, or neither")
	}
	if y := batchNormDevice("SyncBatchNorm", x, w, b, runMean, runVar, true, momentum, eps, sum); y != nil {
		return y
	}
	xc := x.Value.Contiguous()
	spatial := xc.Numel() / max(xs[0]*c, 1)
	o := &syncBatchNormOp{batchNormOp: batchNormOp{inputs: ins(x, w, b), n: xs[0], c: c, spatial: spatial, training: true,
		xhat: tensor.New(xc.DType(), xs...), rstd: make([]float64, c)}, sum: sum}
	// Local sums, then the global ones: [sum x | sum x² | count].
	buf := make([]float64, 2*c+1)
	if xc.DType() == tensor.Float64 {
		localMoments(&o.batchNormOp, buf, xc.F64())
	} else {
		localMoments(&o.batchNormOp, buf, xc.F32())
	}
	if err := sum(buf); err != nil {
		panic(fmt.Errorf("autograd: SyncBatchNorm: all-reduce of the batch statistics: %w", err))
	}
	o.count = buf[2*c]
	if o.count <= 1 {
		panic(fmt.Sprintf("autograd: SyncBatchNorm: expected more than 1 value per channel across all replicas when training, got %v (local input %v)", o.count, xs))
	}
	mean, vr := make([]float64, c), make([]float64, c)
	for ch := range c {
		mean[ch] = buf[ch] / o.count
		vr[ch] = max(buf[c+ch]/o.count-mean[ch]*mean[ch], 0)
	}
	y := tensor.New(xc.DType(), xs...)
	if xc.DType() == tensor.Float64 {
		syncBNFwd(o, y.F64(), xc.F64(), affine[float64](w), affine[float64](b), optData[float64](runMean), optData[float64](runVar), mean, vr, momentum, eps)
	} else {
		syncBNFwd(o, y.F32(), xc.F32(), affine[float32](w), affine[float32](b), optData[float32](runMean), optData[float32](runVar), mean, vr, momentum, eps)
	}
	return FromOp(y, o)
}

type syncBatchNormOp struct {
	batchNormOp
	sum   SumAcrossReplicas
	count float64 // values per channel across all replicas
}

func (o *syncBatchNormOp) Name() string { return "SyncBatchNorm" }

func localMoments[T float](o *batchNormOp, buf []float64, x []T) {
	n, c, l := o.n, o.c, o.spatial
	for ch := 0; ch < c; ch++ {
		var s, ss float64
		for i := 0; i < n; i++ {
			for _, v := range x[(i*c+ch)*l : (i*c+ch+1)*l] {
				f := float64(v)
				s += f
				ss += f * f
			}
		}
		buf[ch], buf[c+ch] = s, ss
	}
	buf[2*c] = float64(n * l)
}

func syncBNFwd[T float](o *syncBatchNormOp, y, x, w, b, rm, rv []T, mean, vr []float64, momentum, eps float64) {
	n, c, l := o.n, o.c, o.spatial
	xh := data[T](o.xhat)
	for ch := 0; ch < c; ch++ {
		if rm != nil {
			rm[ch] = T((1-momentum)*float64(rm[ch]) + momentum*mean[ch])
			rv[ch] = T((1-momentum)*float64(rv[ch]) + momentum*vr[ch]*o.count/(o.count-1))
		}
		rstd := 1 / math.Sqrt(vr[ch]+eps)
		o.rstd[ch] = rstd
		scale, shift := 1.0, 0.0
		if w != nil {
			scale = float64(w[ch])
		}
		if b != nil {
			shift = float64(b[ch])
		}
		for i := 0; i < n; i++ {
			off := (i*c + ch) * l
			for j, v := range x[off : off+l] {
				h := (float64(v) - mean[ch]) * rstd
				xh[off+j] = T(h)
				y[off+j] = T(h*scale + shift)
			}
		}
	}
}

func (o *syncBatchNormOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardInto(gy, nil)
}

func (o *syncBatchNormOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 3)
	if gy.DType() == tensor.Float64 {
		syncBNBwd[float64](o, gy, dst, grads)
	} else {
		syncBNBwd[float32](o, gy, dst, grads)
	}
	return grads
}

func syncBNBwd[T float](o *syncBatchNormOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	x, w, b := o.in(0), o.in(1), o.in(2)
	n, c, l := o.n, o.c, o.spatial
	gy, xh := data[T](gyT), data[T](o.xhat)
	buf := make([]float64, 2*c) // [sum gy | sum gy*xhat]
	for ch := 0; ch < c; ch++ {
		var sg, sgh float64
		for i := 0; i < n; i++ {
			off := (i*c + ch) * l
			h := xh[off : off+l]
			for j, g := range gy[off : off+l] {
				sg += float64(g)
				sgh += float64(g) * float64(h[j])
			}
		}
		buf[ch], buf[c+ch] = sg, sgh
	}
	if w != nil && needs(w) {
		dw := paramGrad[T](1, dst, grads, gyT.DType(), w.Value.Shape())
		for ch := range c {
			dw[ch] += T(buf[c+ch])
		}
	}
	if needs(b) {
		db := paramGrad[T](2, dst, grads, gyT.DType(), b.Value.Shape())
		for ch := range c {
			db[ch] += T(buf[ch])
		}
	}
	if !needs(x) {
		return
	}
	if err := o.sum(buf); err != nil {
		panic(fmt.Errorf("autograd: SyncBatchNorm backward: all-reduce of the gradient sums: %w", err))
	}
	var wd []T
	if w != nil {
		wd = data[T](w.Value)
	}
	grads[0] = tensor.New(gyT.DType(), x.Value.Shape()...)
	dx := data[T](grads[0])
	for ch := 0; ch < c; ch++ {
		scale := o.rstd[ch]
		if wd != nil {
			scale *= float64(wd[ch])
		}
		mg, mgh := buf[ch]/o.count, buf[c+ch]/o.count
		for i := 0; i < n; i++ {
			off := (i*c + ch) * l
			h := xh[off : off+l]
			out := dx[off : off+l]
			for j, g := range gy[off : off+l] {
				out[j] = T(scale * (float64(g) - mg - float64(h[j])*mgh))
			}
		}
	}
}
