package autograd

import (
	"fmt"
	"math"

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
	xs := x.Value.Shape()
	if len(xs) < 2 {
		panic(fmt.Sprintf("autograd: BatchNorm: input shape %v, want [N, C, *]", xs))
	}
	c := xs[1]
	for _, p := range []*tensor.Tensor{runMean, runVar, value(w), value(b)} {
		if p != nil && (p.Numel() != c || p.DType() != x.Value.DType()) {
			panic(fmt.Sprintf("autograd: BatchNorm: parameter or buffer %v %v does not match %d channels of %v input %v", p.DType(), p.Shape(), c, x.Value.DType(), xs))
		}
	}
	if (runMean == nil) != (runVar == nil) {
		panic("autograd: BatchNorm: give both running mean and running variance, or neither")
	}
	if !training && runMean == nil {
		panic("autograd: BatchNorm: evaluation mode needs running statistics")
	}
	xc := x.Value.Contiguous()
	spatial := xc.Numel() / max(xs[0]*c, 1)
	cnt := xs[0] * spatial
	if training && cnt <= 1 {
		panic(fmt.Sprintf("autograd: BatchNorm: expected more than 1 value per channel when training, got input shape %v", xs))
	}
	if y := batchNormDevice("BatchNorm", x, w, b, runMean, runVar, training, momentum, eps, nil); y != nil {
		return y
	}
	o := &batchNormOp{inputs: ins(x, w, b), n: xs[0], c: c, spatial: spatial, training: training,
		xhat: tensor.New(xc.DType(), xs...), rstd: make([]float64, c)}
	y := tensor.New(xc.DType(), xs...)
	if xc.DType() == tensor.Float64 {
		batchNormFwd(o, y.F64(), xc.F64(), affine[float64](w), affine[float64](b), optData[float64](runMean), optData[float64](runVar), momentum, eps)
	} else {
		batchNormFwd(o, y.F32(), xc.F32(), affine[float32](w), affine[float32](b), optData[float32](runMean), optData[float32](runVar), momentum, eps)
	}
	return FromOp(y, o)
}

func value(v *Variable) *tensor.Tensor {
	if v == nil {
		return nil
	}
	return v.Value
}

// optData returns t's data (t must be contiguous so updates land in it), or nil.
func optData[T float](t *tensor.Tensor) []T {
	if t == nil {
		return nil
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("autograd: BatchNorm: running statistics of shape %v must be contiguous", t.Shape()))
	}
	return data[T](t)
}

type batchNormOp struct {
	inputs        // x, w (may be nil), b (may be nil)
	n, c, spatial int
	training      bool
	xhat          *tensor.Tensor
	rstd          []float64 // per channel
}

func (o *batchNormOp) Name() string { return "BatchNorm" }
func (o *batchNormOp) freshGrads()  {}

func batchNormFwd[T float](o *batchNormOp, y, x, w, b, rm, rv []T, momentum, eps float64) {
	n, c, l := o.n, o.c, o.spatial
	cnt := float64(n * l)
	xh := data[T](o.xhat)
	for ch := 0; ch < c; ch++ {
		var mean, vr float64
		if o.training {
			for i := 0; i < n; i++ {
				for _, v := range x[(i*c+ch)*l : (i*c+ch+1)*l] {
					mean += float64(v)
				}
			}
			mean /= cnt
			for i := 0; i < n; i++ {
				for _, v := range x[(i*c+ch)*l : (i*c+ch+1)*l] {
					e := float64(v) - mean
					vr += e * e
				}
			}
			vr /= cnt
			if rm != nil {
				rm[ch] = T((1-momentum)*float64(rm[ch]) + momentum*mean)
				rv[ch] = T((1-momentum)*float64(rv[ch]) + momentum*vr*cnt/(cnt-1))
			}
		} else {
			mean, vr = float64(rm[ch]), float64(rv[ch])
		}
		rstd := 1 / math.Sqrt(vr+eps)
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
				h := (float64(v) - mean) * rstd
				xh[off+j] = T(h)
				y[off+j] = T(h*scale + shift)
			}
		}
	}
}

func (o *batchNormOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *batchNormOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	grads := make([]*tensor.Tensor, 3)
	if gy.DType() == tensor.Float64 {
		batchNormBwd[float64](o, gy, dst, grads)
	} else {
		batchNormBwd[float32](o, gy, dst, grads)
	}
	return grads
}

func batchNormBwd[T float](o *batchNormOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	x, w, b := o.in(0), o.in(1), o.in(2)
	n, c, l := o.n, o.c, o.spatial
	cnt := float64(n * l)
	gy, xh := data[T](gyT), data[T](o.xhat)
	var wd, dw, db, dx []T
	if w != nil {
		wd = data[T](w.Value)
		if needs(w) {
			dw = paramGrad[T](1, dst, grads, gyT.DType(), w.Value.Shape())
		}
	}
	if needs(b) {
		db = paramGrad[T](2, dst, grads, gyT.DType(), b.Value.Shape())
	}
	if needs(x) {
		grads[0] = tensor.New(gyT.DType(), x.Value.Shape()...)
		dx = data[T](grads[0])
	}
	for ch := 0; ch < c; ch++ {
		var sg, sgh float64 // sum(gy), sum(gy * xhat)
		for i := 0; i < n; i++ {
			off := (i*c + ch) * l
			h := xh[off : off+l]
			for j, g := range gy[off : off+l] {
				sg += float64(g)
				sgh += float64(g) * float64(h[j])
			}
		}
		if dw != nil {
			dw[ch] += T(sgh)
		}
		if db != nil {
			db[ch] += T(sg)
		}
		if dx == nil {
			continue
		}
		scale := o.rstd[ch]
		if wd != nil {
			scale *= float64(wd[ch])
		}
		for i := 0; i < n; i++ {
			off := (i*c + ch) * l
			h := xh[off : off+l]
			out := dx[off : off+l]
			for j, g := range gy[off : off+l] {
				if o.training {
					// dx = w*rstd * (gy - mean(gy) - xhat*mean(gy*xhat))
					out[j] = T(scale * (float64(g) - sg/cnt - float64(h[j])*sgh/cnt))
				} else {
					out[j] = T(scale * float64(g))
				}
			}
		}
	}
}
