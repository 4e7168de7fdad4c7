package tensor

import (
	"math"
	"unsafe"
)

// The host's entries of the reductions along one axis and of the binary
// cross-entropy (MaxDim, BCEWithLogits): the loops autograd's Max and
// BCEWithLogits ran over host slices, moved behind the table unchanged.

// int32s views a float32 tensor's elements as the int32 bits the index
// entries keep there (MaxDim's arg, as MaxPool2d's idx): one dtype for
// indices on every device, which hold float32 only.
func int32s(t *Tensor) []int32 {
	f := f32s(t)
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

func cpuMaxDim(y, arg, x *Tensor, outer, n, inner int) {
	if x.dtype == Float64 {
		maxRows(f64s(y), int32s(arg), f64s(x), outer, n, inner)
		return
	}
	maxRows(f32s(y), int32s(arg), f32s(x), outer, n, inner)
}

// maxRows walks x a row of inner elements at a time (in memory order),
// keeping the running maximum of each column; the first NaN wins, as
// torch's.
func maxRows[T float](y []T, arg []int32, x []T, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		base := o * n * inner
		out, am := y[o*inner:(o+1)*inner], arg[o*inner:(o+1)*inner]
		copy(out, x[base:base+inner])
		clear(am)
		for j := 1; j < n; j++ {
			row := x[base+j*inner : base+(j+1)*inner]
			for i, v := range row {
				if v > out[i] || (v != v && out[i] == out[i]) {
					out[i], am[i] = v, int32(j)
				}
			}
		}
	}
}

func cpuMaxDimBackward(dx, dy, arg *Tensor, outer, n, inner int) {
	if dx.dtype == Float64 {
		maxRowsBackward(f64s(dx), f64s(dy), int32s(arg), n, inner)
		return
	}
	maxRowsBackward(f32s(dx), f32s(dy), int32s(arg), n, inner)
}

func maxRowsBackward[T float](dx, dy []T, arg []int32, n, inner int) {
	clear(dx)
	for k, g := range dy {
		o, i := k/inner, k%inner
		dx[(o*n+int(arg[k]))*inner+i] = g
	}
}

func cpuBCEWithLogits(loss, x, t *Tensor, reduce bool, div float64) {
	if x.dtype == Float64 {
		bceForward(f64s(loss), f64s(x), f64s(t), reduce, div)
		return
	}
	bceForward(f32s(loss), f32s(x), f32s(t), reduce, div)
}

// bceForward evaluates each element in float64 (log1p and exp of the
// float32 logits), accumulating the reduced loss in float64 too.
func bceForward[T float](y, x, t []T, reduce bool, div float64) {
	t = t[:len(x)]
	s := 0.0
	for i, v := range x {
		xv := float64(v)
		l := math.Max(xv, 0) - xv*float64(t[i]) + math.Log1p(math.Exp(-math.Abs(xv)))
		if reduce {
			s += l
		} else {
			y[i] = T(l)
		}
	}
	if reduce {
		y[0] = T(s / div)
	}
}

func cpuBCEWithLogitsBackward(dx, dt, gy, x, t *Tensor, reduced bool, div float64) {
	if x.dtype == Float64 {
		bceBackward(optHostF64(dx), optHostF64(dt), f64s(gy), f64s(x), f64s(t), reduced, div)
		return
	}
	bceBackward(optHostF32(dx), optHostF32(dt), f32s(gy), f32s(x), f32s(t), reduced, div)
}

func bceBackward[T float](gx, gt, gy, x, t []T, reduced bool, div float64) {
	var g T
	if reduced {
		g = gy[0] / T(div)
	}
	for i, v := range x {
		if !reduced {
			g = gy[i]
		}
		if gx != nil {
			gx[i] = T(1/(1+math.Exp(-float64(v))))*g - t[i]*g
		}
		if gt != nil {
			gt[i] = -v * g
		}
	}
}
