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

// softmax runs the Softmax or LogSoftmax entry of a's device table, which
// works over the last dimension: another axis is swapped to the last
// place and back (two copies, which no training step here pays: they
// normalize over the last dimension).
func softmax(op string, a *Tensor, axis int, log bool) *Tensor {
	if a.Dim() == 0 {
		panic(fmt.Sprintf("tensor: %s: scalar input", op))
	}
	ax := normAxis(op, axis, a.Dim(), a.shape)
	k := table(op, a)
	kern := k.Softmax
	if log {
		kern = k.LogSoftmax
	}
	need(kern != nil, op, a)
	last := a.Dim() - 1
	x := a
	if ax != last {
		x = Transpose(a, ax, last)
	}
	x = x.Contiguous()
	y := EmptyAs(x, x.shape...) // written whole
	if x.Numel() > 0 {
		kern(y, x)
	}
	if ax != last {
		y = Transpose(y, ax, last).Contiguous()
	}
	return y
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
	softmaxBackward("LogSoftmaxBackward", gx, gy, y, axis, true)
}

// SoftmaxBackward writes into gx the gradient of Softmax along axis from
// its output y: gx = y * (gy - Σ_axis gy·y). gx, gy and y are contiguous
// with y's shape; gx may be gy.
func SoftmaxBackward(gx, gy, y *Tensor, axis int) {
	softmaxBackward("SoftmaxBackward", gx, gy, y, axis, false)
}

func softmaxBackward(op string, gx, gy, y *Tensor, axis int, log bool) {
	ax := normAxis(op, axis, y.Dim(), y.shape)
	k := table(op, gx, gy, y)
	kern := k.SoftmaxBackward
	if log {
		kern = k.LogSoftmaxBackward
	}
	need(kern != nil, op, y)
	if y.Numel() == 0 {
		return
	}
	last := y.Dim() - 1
	if ax == last {
		kern(gx, gy, y)
		return
	}
	// Another axis: the entry runs over the last dimension of the
	// swapped operands, and the result is copied back into gx.
	gyT, yT := Transpose(gy, ax, last).Contiguous(), Transpose(y, ax, last).Contiguous()
	dx := EmptyAs(yT, yT.shape...)
	kern(dx, gyT, yT)
	if err := Copy(gx, Transpose(dx, ax, last).Contiguous()); err != nil {
		panic(err.Error())
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

// The host's entries (cpu_kernels.go): rows of the last dimension.

func lastDim(t *Tensor) (rows, cols int) {
	cols = t.shape[len(t.shape)-1]
	return t.Numel() / max(cols, 1), cols
}

func cpuSoftmax(log bool) func(y, x *Tensor) {
	return func(y, x *Tensor) {
		rows, cols := lastDim(x)
		if x.dtype == Float64 {
			softmaxBlock(f64s(y), f64s(x), rows, cols, 1, log)
		} else {
			softmaxBlock(f32s(y), f32s(x), rows, cols, 1, log)
		}
	}
}

func cpuLogSoftmaxBackward(dx, dy, y *Tensor) {
	rows, cols := lastDim(y)
	if y.dtype == Float64 {
		logSoftmaxBwd(f64s(dx), f64s(dy), f64s(y), rows, cols, 1)
	} else {
		logSoftmaxBwd(f32s(dx), f32s(dy), f32s(y), rows, cols, 1)
	}
}

func cpuSoftmaxBackward(dx, dy, y *Tensor) {
	rows, cols := lastDim(y)
	if y.dtype == Float64 {
		softmaxBwd(f64s(dx), f64s(dy), f64s(y), rows, cols)
	} else {
		softmaxBwd(f32s(dx), f32s(dy), f32s(y), rows, cols)
	}
}

// softmaxBwd is dx = y * (dy - Σ dy·y) over rows of cols (dx may be dy).
func softmaxBwd[T float](dx, dy, y []T, rows, cols int) {
	for r := range rows {
		g, p, out := dy[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
		var dot T
		for j, v := range g {
			dot += v * p[j]
		}
		for j, v := range g {
			out[j] = p[j] * (v - dot)
		}
	}
}
