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
