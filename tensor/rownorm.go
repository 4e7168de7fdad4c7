package tensor

import (
	"fmt"
	"math"
)

// The row kernels of a transformer step: LayerNorm over rows of d, the
// attention's softmax over rows of scores, their backwards, and a Linear's
// bias gradient. Each runs the vectorised C kernel of rownorm_kernels.c for
// float32 where the build has it (the *C hooks of rownorm_cgo.go report
// whether they ran), else the Go loop here, which is also the float64
// path.

// LayerNormRows normalizes rows of d: xhat = (x - mean)·rstd with rstd =
// 1/√(var + eps) (biased variance), and y = xhat·w + b, w and b optional
// (nil). rstd gets one value per row. The statistics accumulate in
// float64 and are rounded to T, as torch keeps them for its backward,
// before xhat is computed from them: the backward that recomputes xhat
// from x, mean and rstd (LayerNormRowsBackwardFromX) gets the forward's
// bits.
func LayerNormRows[T float](y, xhat, rstd, x, w, b []T, rows, d int, eps float64) {
	checkRows("LayerNormRows", rows, d, len(xhat))
	layerNormRows(y, xhat, nil, rstd, x, w, b, rows, d, eps)
}

// LayerNormRowsStats is LayerNormRows that keeps each row's mean (in mean)
// instead of xhat, as torch's layer_norm saves its mean and rstd:
// LayerNormRowsBackwardFromX recomputes xhat from x with them, to the same
// bits. Keeping xhat cost an activation-sized tensor per LayerNorm until
// the backward, and a third of the forward's memory traffic.
func LayerNormRowsStats[T float](y, mean, rstd, x, w, b []T, rows, d int, eps float64) {
	if rows*d > 0 {
		_ = mean[rows-1]
	}
	layerNormRows(y, nil, mean, rstd, x, w, b, rows, d, eps)
}

// layerNormRows is LayerNormRows with xhat or mean nil when not kept.
func layerNormRows[T float](y, xhat, mean, rstd, x, w, b []T, rows, d int, eps float64) {
	checkRows("LayerNormRows", rows, d, len(y), len(x))
	checkAffine("LayerNormRows", d, w, b)
	if rows*d == 0 {
		return
	}
	_ = rstd[rows-1]
	if layerNormC(y, xhat, mean, rstd, x, w, b, rows, d, eps) {
		return
	}
	hbuf := make([]T, d)
	for r := range rows {
		row, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
		hr := hbuf
		if xhat != nil {
			hr = xhat[r*d : (r+1)*d]
		}
		m := 0.0
		for _, v := range row {
			m += float64(v)
		}
		m /= float64(d)
		vr := 0.0
		for _, v := range row {
			e := float64(v) - m
			vr += e * e
		}
		mt, rs := T(m), T(1/math.Sqrt(vr/float64(d)+eps))
		rstd[r] = rs
		if mean != nil {
			mean[r] = mt
		}
		xhatRow(hr, row, float64(mt), float64(rs))
		for i, h := range hr {
			if w != nil {
				h *= w[i]
			}
			if b != nil {
				h += b[i]
			}
			yr[i] = h
		}
	}
}

// xhatRow writes one row's xhat = (x - mean)·rstd: the forward's, and the
// backward's when it recomputes it.
func xhatRow[T float](h, x []T, mean, rstd float64) {
	for i, v := range x {
		h[i] = T((float64(v) - mean) * rstd)
	}
}

// LayerNormRowsBackward is LayerNormRows' backward from the output gradient
// gy and the saved xhat and rstd: dw += Σ gy·xhat and db += Σ gy over the
// rows (each nil when not wanted), and dx (nil when not wanted) =
// rstd·(gh - mean(gh) - xhat·mean(gh·xhat)) with gh = gy·w (w may be nil).
func LayerNormRowsBackward[T float](dx, dw, db, gy, xhat, w, rstd []T, rows, d int) {
	checkRows("LayerNormRowsBackward", rows, d, len(xhat))
	layerNormRowsBackward(dx, dw, db, gy, xhat, nil, nil, w, rstd, rows, d)
}

// LayerNormRowsBackwardFromX is LayerNormRowsBackward after
// LayerNormRowsStats: xhat is recomputed from the forward's x, mean and
// rstd, to the bits LayerNormRows would have kept.
func LayerNormRowsBackwardFromX[T float](dx, dw, db, gy, x, w, mean, rstd []T, rows, d int) {
	checkRows("LayerNormRowsBackward", rows, d, len(x))
	if rows*d > 0 {
		_ = mean[rows-1]
	}
	layerNormRowsBackward(dx, dw, db, gy, nil, x, mean, w, rstd, rows, d)
}

// layerNormRowsBackward takes xhat, or x and mean to recompute it.
func layerNormRowsBackward[T float](dx, dw, db, gy, xhat, x, mean, w, rstd []T, rows, d int) {
	checkRows("LayerNormRowsBackward", rows, d, len(gy))
	if dx != nil {
		checkRows("LayerNormRowsBackward", rows, d, len(dx))
	}
	checkAffine("LayerNormRowsBackward", d, w, dw, db)
	if rows*d == 0 {
		return
	}
	_ = rstd[rows-1]
	if layerNormBwdC(dx, dw, db, gy, xhat, x, mean, w, rstd, rows, d) {
		return
	}
	hbuf := make([]T, d)
	for r := range rows {
		g, h := gy[r*d:(r+1)*d], hbuf
		if xhat != nil {
			h = xhat[r*d : (r+1)*d]
		} else {
			xhatRow(h, x[r*d:(r+1)*d], float64(mean[r]), float64(rstd[r]))
		}
		if dw != nil {
			for i, v := range g {
				dw[i] += v * h[i]
			}
		}
		if db != nil {
			for i, v := range g {
				db[i] += v
			}
		}
		if dx == nil {
			continue
		}
		s1, s2 := 0.0, 0.0
		for i, v := range g {
			gh := float64(v)
			if w != nil {
				gh *= float64(w[i])
			}
			s1 += gh
			s2 += gh * float64(h[i])
		}
		s1 /= float64(d)
		s2 /= float64(d)
		rs := float64(rstd[r])
		out := dx[r*d : (r+1)*d]
		for i, v := range g {
			gh := float64(v)
			if w != nil {
				gh *= float64(w[i])
			}
			out[i] = T(rs * (gh - s1 - float64(h[i])*s2))
		}
	}
}

// SoftmaxRows turns each of the l rows of x (l×s scores) into its softmax
// after adding mask (l×s, or nil); with causal, entries j > i are zeroed
// without being read. A row that is all -Inf, or holds a NaN, comes out
// NaN, as in torch.
func SoftmaxRows[T float](x, mask []T, l, s int, causal bool) {
	checkRows("SoftmaxRows", l, s, len(x))
	if mask != nil {
		checkRows("SoftmaxRows", l, s, len(mask))
	}
	if l*s == 0 || softmaxRowsC(x, mask, l, s, causal) {
		return
	}
	for i := range l {
		row := x[i*s : (i+1)*s]
		n := s
		if causal {
			n = min(i+1, s)
			clear(row[n:])
		}
		r := row[:n]
		if mask != nil {
			for j, m := range mask[i*s : i*s+n] {
				r[j] += m
			}
		}
		m := T(math.Inf(-1))
		for _, v := range r {
			m = max(m, v)
		}
		for j := range r {
			r[j] -= m
		}
		expInPlace(r)
		var sum T
		for _, v := range r {
			sum += v
		}
		inv := 1 / sum
		for j := range r {
			r[j] *= inv
		}
	}
}

// expInPlace replaces x by e**x: ExpF32 for float32, math.Exp for float64.
func expInPlace[T float](x []T) {
	if f, ok := any(x).([]float32); ok {
		ExpF32(f, f)
		return
	}
	for i, v := range x {
		x[i] = T(math.Exp(float64(v)))
	}
}

// SoftmaxRowsBackward is the softmax's backward in place over the l rows of
// dp (l×s, the gradient of the probabilities p): dp = p ⊙ (dp - Σ_j dp·p);
// with causal, entries j > i become 0.
func SoftmaxRowsBackward[T float](dp, p []T, l, s int, causal bool) {
	checkRows("SoftmaxRowsBackward", l, s, len(dp), len(p))
	if l*s == 0 || softmaxBwdRowsC(dp, p, l, s, causal) {
		return
	}
	for i := range l {
		n := s
		if causal {
			n = min(i+1, s)
		}
		pr, dr := p[i*s:i*s+n], dp[i*s:(i+1)*s]
		var dot T
		for j, pv := range pr {
			dot += pv * dr[j]
		}
		for j, pv := range pr {
			dr[j] = pv * (dr[j] - dot)
		}
		clear(dr[n:])
	}
}

// AddRows adds the rows of x (rows×cols) to d (cols), one row after
// another: d[c] += Σ_r x[r·cols+c], the same bits in every build.
func AddRows[T float](d, x []T, rows, cols int) {
	checkRows("AddRows", rows, cols, len(x))
	checkRows("AddRows", 1, cols, len(d))
	if rows*cols == 0 || addRowsC(d, x, rows, cols) {
		return
	}
	for r := range rows {
		for c, v := range x[r*cols : (r+1)*cols] {
			d[c] += v
		}
	}
}

// checkRows panics unless every length is at least rows·d (the row
// kernels' buffers).
func checkRows(op string, rows, d int, lens ...int) {
	for _, n := range lens {
		if rows < 0 || d < 0 || n < rows*d {
			panic(fmt.Sprintf("tensor: %s: buffer of %d elements for %d rows of %d", op, n, rows, d))
		}
	}
}

// checkAffine panics unless every non-nil per-column slice has d elements.
func checkAffine[T float](op string, d int, s ...[]T) {
	for _, v := range s {
		if v != nil && len(v) != d {
			panic(fmt.Sprintf("tensor: %s: per-column buffer of %d elements for rows of %d", op, len(v), d))
		}
	}
}
