package tensor

import "math"

// The host's entries of Clamp, PowScalar and Pow's gradients: the loops
// autograd's ops ran over host slices, and unaryLoop's for the forwards,
// moved behind the table unchanged.

func cpuClamp(y, x *Tensor, lo, hi float64) {
	if x.dtype == Float64 {
		unaryLoop(opClamp, f64s(y), f64s(x), lo, hi)
		return
	}
	unaryLoop(opClamp, f32s(y), f32s(x), lo, hi)
}

func cpuClampBackward(dx, dy, x *Tensor, lo, hi float64) {
	if dx.dtype == Float64 {
		clampBackward(f64s(dx), f64s(dy), f64s(x), lo, hi)
		return
	}
	clampBackward(f32s(dx), f32s(dy), f32s(x), lo, hi)
}

// clampBackward passes dy where lo ≤ x ≤ hi, bounds included, as torch.
func clampBackward[T float](dx, dy, x []T, lo, hi float64) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	for i, g := range dy {
		v := float64(x[i])
		if v >= lo && v <= hi {
			dx[i] = g
		} else {
			dx[i] = 0
		}
	}
}

func cpuPowScalar(y, x *Tensor, p float64) {
	if x.dtype == Float64 {
		unaryLoop(opPowS, f64s(y), f64s(x), p, 0)
		return
	}
	unaryLoop(opPowS, f32s(y), f32s(x), p, 0)
}

func cpuPowScalarBackward(dx, dy, x *Tensor, p float64) {
	if dx.dtype == Float64 {
		powScalarBackward(f64s(dx), f64s(dy), f64s(x), p)
		return
	}
	powScalarBackward(f32s(dx), f32s(dy), f32s(x), p)
}

func powScalarBackward[T float](dx, dy, x []T, p float64) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	switch p {
	case 0:
		clear(dx)
	case 1:
		copy(dx, dy)
	case 2:
		for i, g := range dy {
			dx[i] = 2 * g * x[i]
		}
	default:
		for i, g := range dy {
			dx[i] = T(float64(g) * p * math.Pow(float64(x[i]), p-1))
		}
	}
}

func cpuPowBackward(da, db, gy, a, b, y *Tensor) {
	if gy.dtype == Float64 {
		powBackward(optHostF64(da), optHostF64(db), f64s(gy), f64s(a), f64s(b), f64s(y))
		return
	}
	powBackward(optHostF32(da), optHostF32(db), f32s(gy), f32s(a), f32s(b), f32s(y))
}

// powBackward rounds as the chain of tensor ops it replaced did: each
// power and logarithm in float64, then the products in T.
func powBackward[T float](da, db, gy, a, b, y []T) {
	a, b, y = a[:len(gy)], b[:len(gy)], y[:len(gy)]
	for i, g := range gy {
		av, bv := a[i], b[i]
		if da != nil {
			da[i] = g * (bv * T(math.Pow(float64(av), float64(bv-1))))
		}
		if db != nil {
			la := T(math.Log(float64(av)))
			if math.IsInf(float64(la), -1) {
				la = 0 // log(0): the exponent's gradient is taken as 0 there, as torch
			}
			db[i] = g * y[i] * la
		}
	}
}
