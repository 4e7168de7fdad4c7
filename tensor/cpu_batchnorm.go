package tensor

import "math"

// The host's batch-norm entries (Kernels.BatchNorm*), over x [n, c, l]:
// the loops autograd's BatchNorm and SyncBatchNorm ran on host slices,
// with one set of per-channel statistics for both. Sums and statistics
// accumulate in float64, as the CUDA kernels do, and are stored in the
// operands' dtype.

func cpuBatchNormStats(stats, x *Tensor, n, c, l int, sums bool) {
	if x.dtype == Float64 {
		bnStats(f64s(stats), f64s(x), n, c, l, sums)
	} else {
		bnStats(f32s(stats), f32s(x), n, c, l, sums)
	}
}

func bnStats[T float](stats, x []T, n, c, l int, sums bool) {
	cnt := float64(n * l)
	for ch := range c {
		var s, ss float64
		for i := range n {
			for _, v := range x[(i*c+ch)*l : (i*c+ch+1)*l] {
				s += float64(v)
				ss += float64(v) * float64(v)
			}
		}
		if sums {
			stats[ch], stats[c+ch] = T(s), T(ss)
			continue
		}
		mean, vr := s/cnt, 0.0
		for i := range n { // two passes, as torch's CPU batch_norm
			for _, v := range x[(i*c+ch)*l : (i*c+ch+1)*l] {
				e := float64(v) - mean
				vr += e * e
			}
		}
		stats[ch], stats[c+ch] = T(mean), T(vr/cnt)
	}
	stats[2*c] = T(cnt)
}

func cpuBatchNormFinalize(coef, stats, rm, rv *Tensor, training, sums bool, momentum, eps float64) {
	if coef.dtype == Float64 {
		bnFinalize(f64s(coef), optHostF64(stats), optHostF64(rm), optHostF64(rv), training, sums, momentum, eps)
	} else {
		bnFinalize(f32s(coef), optHostF32(stats), optHostF32(rm), optHostF32(rv), training, sums, momentum, eps)
	}
}

func bnFinalize[T float](coef, stats, rm, rv []T, training, sums bool, momentum, eps float64) {
	c := len(coef) / 2
	for ch := range c {
		var mean, vr float64
		if training {
			cnt := float64(stats[2*c])
			mean, vr = float64(stats[ch]), float64(stats[c+ch])
			if sums {
				mean /= cnt
				vr = max(vr/cnt-mean*mean, 0)
			}
			if rm != nil {
				rm[ch] = T((1-momentum)*float64(rm[ch]) + momentum*mean)
				rv[ch] = T((1-momentum)*float64(rv[ch]) + momentum*vr*cnt/(cnt-1))
			}
		} else {
			mean, vr = float64(rm[ch]), float64(rv[ch])
		}
		coef[ch], coef[c+ch] = T(mean), T(1/math.Sqrt(vr+eps))
	}
}

func cpuBatchNormApply(y, xhat, x, coef, w, b *Tensor, n, c, l int) {
	if x.dtype == Float64 {
		bnApply(f64s(y), f64s(xhat), f64s(x), f64s(coef), optHostF64(w), optHostF64(b), n, c, l)
	} else {
		bnApply(f32s(y), f32s(xhat), f32s(x), f32s(coef), optHostF32(w), optHostF32(b), n, c, l)
	}
}

func bnApply[T float](y, xhat, x, coef, w, b []T, n, c, l int) {
	for ch := range c {
		mean, rstd := float64(coef[ch]), float64(coef[c+ch])
		scale, shift := 1.0, 0.0
		if w != nil {
			scale = float64(w[ch])
		}
		if b != nil {
			shift = float64(b[ch])
		}
		for i := range n {
			off := (i*c + ch) * l
			for j, v := range x[off : off+l] {
				h := (float64(v) - mean) * rstd
				xhat[off+j] = T(h)
				y[off+j] = T(h*scale + shift)
			}
		}
	}
}

func cpuBatchNormBackwardReduce(sums, dw, db, gy, xhat *Tensor, n, c, l int) {
	if gy.dtype == Float64 {
		bnBwdReduce(f64s(sums), optHostF64(dw), optHostF64(db), f64s(gy), f64s(xhat), n, c, l)
	} else {
		bnBwdReduce(f32s(sums), optHostF32(dw), optHostF32(db), f32s(gy), f32s(xhat), n, c, l)
	}
}

func bnBwdReduce[T float](sums, dw, db, gy, xhat []T, n, c, l int) {
	for ch := range c {
		var sg, sgh float64
		for i := range n {
			off := (i*c + ch) * l
			h := xhat[off : off+l]
			for j, g := range gy[off : off+l] {
				sg += float64(g)
				sgh += float64(g) * float64(h[j])
			}
		}
		sums[ch], sums[c+ch] = T(sg), T(sgh)
		if dw != nil {
			dw[ch] += T(sgh)
		}
		if db != nil {
			db[ch] += T(sg)
		}
	}
}

func cpuBatchNormBackwardInput(dx, gy, xhat, coef, w, sums, stats *Tensor, n, c, l int) {
	if gy.dtype == Float64 {
		bnBwdInput(f64s(dx), f64s(gy), f64s(xhat), f64s(coef), optHostF64(w), optHostF64(sums), optHostF64(stats), n, c, l)
	} else {
		bnBwdInput(f32s(dx), f32s(gy), f32s(xhat), f32s(coef), optHostF32(w), optHostF32(sums), optHostF32(stats), n, c, l)
	}
}

func bnBwdInput[T float](dx, gy, xhat, coef, w, sums, stats []T, n, c, l int) {
	for ch := range c {
		scale := float64(coef[c+ch])
		if w != nil {
			scale *= float64(w[ch])
		}
		var mg, mgh float64
		if sums != nil { // training: dx = w*rstd * (gy - mean(gy) - xhat*mean(gy*xhat))
			cnt := float64(stats[2*c])
			mg, mgh = float64(sums[ch])/cnt, float64(sums[c+ch])/cnt
		}
		for i := range n {
			off := (i*c + ch) * l
			h := xhat[off : off+l]
			out := dx[off : off+l]
			for j, g := range gy[off : off+l] {
				out[j] = T(scale * (float64(g) - mg - float64(h[j])*mgh))
			}
		}
	}
}
