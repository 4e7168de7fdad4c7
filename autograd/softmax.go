package autograd

import (
	"math"

	"github.com/goddp/goddp/tensor"
)

// Softmax returns exp(a) / sum(exp(a)) along axis (negative counts from the
// end), computed stably. Its gradient is y * (gy - sum(gy * y)) along axis.
func Softmax(a *Variable, axis int) *Variable {
	x := a.Value.Contiguous()
	axis = normAxis("Softmax", axis, x.Dim())
	outer, n, inner := splitAt(x.Shape(), axis)
	if y := tensor.SoftmaxDevice(x, inner); y != nil {
		return FromOp(y, &softmaxOp{inputs: ins(a), y: y, outer: outer, n: n, inner: inner})
	}
	y := tensor.New(x.DType(), x.Shape()...)
	if x.DType() == tensor.Float64 {
		softmaxFwd(y.F64(), x.F64(), outer, n, inner, false)
	} else {
		softmaxFwd(y.F32(), x.F32(), outer, n, inner, false)
	}
	return FromOp(y, &softmaxOp{inputs: ins(a), y: y, outer: outer, n: n, inner: inner})
}

// softmaxFwd writes softmax (or log-softmax when log is set) of x along the
// middle dimension of [outer, n, inner] into y, accumulating in float64.
func softmaxFwd[T float](y, x []T, outer, n, inner int, log bool) {
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*n*inner + i
			m := math.Inf(-1)
			for j := 0; j < n; j++ {
				m = math.Max(m, float64(x[base+j*inner]))
			}
			s := 0.0
			if log {
				for j := 0; j < n; j++ {
					s += math.Exp(float64(x[base+j*inner]) - m)
				}
				lse := m + math.Log(s)
				for j := 0; j < n; j++ {
					y[base+j*inner] = T(float64(x[base+j*inner]) - lse)
				}
				continue
			}
			for j := 0; j < n; j++ {
				e := math.Exp(float64(x[base+j*inner]) - m)
				y[base+j*inner] = T(e)
				s += e
			}
			inv := 1 / s
			for j := 0; j < n; j++ {
				y[base+j*inner] = T(float64(y[base+j*inner]) * inv)
			}
		}
	}
}

type softmaxOp struct {
	inputs
	y               *tensor.Tensor
	outer, n, inner int
}

func (o *softmaxOp) Name() string { return "Softmax" }
func (o *softmaxOp) freshGrads()  {}

func (o *softmaxOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *softmaxOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *softmaxOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if gx := tensor.SoftmaxBackwardDevice(gy, o.y); gx != nil {
		return []*tensor.Tensor{gx}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { softmaxBwd(gx, gy, o.y.F32(), o.outer, o.n, o.inner) },
		func(gx, gy []float64) { softmaxBwd(gx, gy, o.y.F64(), o.outer, o.n, o.inner) })
}

func softmaxBwd[T float](gx, gy, y []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*n*inner + i
			var dot T
			for j := 0; j < n; j++ {
				dot += gy[base+j*inner] * y[base+j*inner]
			}
			for j := 0; j < n; j++ {
				k := base + j*inner
				gx[k] = y[k] * (gy[k] - dot)
			}
		}
	}
}
