package tensor

import (
	"fmt"
	"math"
)

// Softmax returns exp(a) / sum(exp(a)) along axis, computed stably
// (the maximum is subtracted first).
func Softmax(a *Tensor, axis int) *Tensor { return softmax("Softmax", a, axis, false) }

// LogSoftmax returns a - logsumexp(a) along axis, computed stably.
func LogSoftmax(a *Tensor, axis int) *Tensor { return softmax("LogSoftmax", a, axis, true) }

func softmax(op string, a *Tensor, axis int, log bool) *Tensor {
	if a.Dim() == 0 {
		panic(fmt.Sprintf("tensor: %s: scalar input", op))
	}
	ax := normAxis(op, axis, a.Dim(), a.shape)
	if a.dev != nil {
		if !log {
			panic(NoKernel(op, a.Device()))
		}
		return logSoftmaxDevice(op, a, ax)
	}
	outer, n, inner := split3(a.shape, ax, ax+1)
	out := New(a.dtype, a.shape...)
	c := a.Contiguous()
	if a.dtype == Float64 {
		softmaxBlock(out.f64, c.F64(), outer, n, inner, log)
	} else {
		softmaxBlock(out.f32, c.F32(), outer, n, inner, log)
	}
	return out
}

func softmaxBlock[T float](dst, src []T, outer, n, inner int, log bool) {
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			base := o*n*inner + j
			m := math.Inf(-1)
			for r := 0; r < n; r++ {
				if v := float64(src[base+r*inner]); v > m || v != v {
					m = v
				}
			}
			if math.IsInf(m, -1) {
				m = 0 // all -Inf: avoid -Inf - -Inf = NaN; result is NaN/-Inf as torch
			}
			var s float64
			for r := 0; r < n; r++ {
				e := math.Exp(float64(src[base+r*inner]) - m)
				if !log {
					dst[base+r*inner] = T(e)
				}
				s += e
			}
			if log {
				lse := m + math.Log(s)
				for r := 0; r < n; r++ {
					p := base + r*inner
					dst[p] = T(float64(src[p]) - lse)
				}
			} else {
				inv := 1 / s
				for r := 0; r < n; r++ {
					p := base + r*inner
					dst[p] = T(float64(dst[p]) * inv)
				}
			}
		}
	}
}

// LogSoftmaxBackward writes into gx the gradient of LogSoftmax along axis
// from its output y: gx = gy - exp(y) * Σ_axis gy. gx, gy and y are
// contiguous with y's shape; gx may be gy.
func LogSoftmaxBackward(gx, gy, y *Tensor, axis int) {
	ax := normAxis("LogSoftmaxBackward", axis, y.Dim(), y.shape)
	if onDevice(gx, gy, y) {
		k := kernelsFor("LogSoftmaxBackward", gx, gy, y)
		NeedKernel(k.LogSoftmaxBackward != nil, "LogSoftmaxBackward", y.Device())
		if ax != y.Dim()-1 {
			panic(NoKernel("LogSoftmaxBackward over a dimension other than the last", y.Device()))
		}
		k.LogSoftmaxBackward(gx, gy, y)
		return
	}
	outer, n, inner := split3(y.shape, ax, ax+1)
	if y.dtype == Float64 {
		logSoftmaxBwd(gx.F64(), gy.F64(), y.F64(), outer, n, inner)
	} else {
		logSoftmaxBwd(gx.F32(), gy.F32(), y.F32(), outer, n, inner)
	}
}

func logSoftmaxBwd[T float](gx, gy, y []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*n*inner + i
			var s T
			for j := 0; j < n; j++ {
				s += gy[base+j*inner]
			}
			for j := 0; j < n; j++ {
				k := base + j*inner
				gx[k] = gy[k] - T(math.Exp(float64(y[k])))*s
			}
		}
	}
}

// logSoftmaxDevice is LogSoftmax over the last dimension on a device.
func logSoftmaxDevice(op string, a *Tensor, ax int) *Tensor {
	k := kernelsFor(op, a)
	NeedKernel(k.LogSoftmax != nil, op, a.Device())
	if ax != a.Dim()-1 {
		panic(NoKernel(op+" over a dimension other than the last", a.Device()))
	}
	x := a.Contiguous()
	y := MustEmptyOn(x.Device(), x.shape...)
	k.LogSoftmax(y, x)
	return y
}
