//go:build !cgo || noblas

package tensor

import "math"

// LayerNormF32 normalizes rows of d: xhat = (x - mean)·rstd with rstd =
// 1/√(var + eps) (biased variance, statistics in float64), and y = xhat·w +
// b, w and b optional (nil). rstd gets one value per row.
func LayerNormF32(y, xhat []float32, rstd []float64, x, w, b []float32, rows, d int, eps float64) {
	checkRows("LayerNormF32", rows, d, len(y), len(xhat), len(x))
	checkAffine("LayerNormF32", d, w, b)
	for r := range rows {
		row, hr, yr := x[r*d:(r+1)*d], xhat[r*d:(r+1)*d], y[r*d:(r+1)*d]
		mean := 0.0
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(d)
		vr := 0.0
		for _, v := range row {
			e := float64(v) - mean
			vr += e * e
		}
		rs := 1 / math.Sqrt(vr/float64(d)+eps)
		rstd[r] = rs
		for i, v := range row {
			h := float32((float64(v) - mean) * rs)
			hr[i] = h
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

// LayerNormBwdF32 is LayerNormF32's backward from the output gradient gy
// and the saved xhat and rstd: dw += Σ gy·xhat and db += Σ gy over the
// rows (each nil when not wanted), and dx (nil when not wanted) =
// rstd·(gh - mean(gh) - xhat·mean(gh·xhat)) with gh = gy·w (w may be nil).
func LayerNormBwdF32(dx, dw, db, gy, xhat, w []float32, rstd []float64, rows, d int) {
	checkRows("LayerNormBwdF32", rows, d, len(gy), len(xhat))
	if dx != nil {
		checkRows("LayerNormBwdF32", rows, d, len(dx))
	}
	checkAffine("LayerNormBwdF32", d, w, dw, db)
	for r := range rows {
		g, h := gy[r*d:(r+1)*d], xhat[r*d:(r+1)*d]
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
		rs := rstd[r]
		out := dx[r*d : (r+1)*d]
		for i, v := range g {
			gh := float64(v)
			if w != nil {
				gh *= float64(w[i])
			}
			out[i] = float32(rs * (gh - s1 - float64(h[i])*s2))
		}
	}
}

// SoftmaxRowsF32 turns each of the l rows of x (l×s scores) into its
// softmax after adding mask (l×s, or nil); with causal, entries j > i are
// zeroed without being read. A row that is all -Inf, or holds a NaN, comes
// out NaN, as in torch.
func SoftmaxRowsF32(x, mask []float32, l, s int, causal bool) {
	checkRows("SoftmaxRowsF32", l, s, len(x))
	if mask != nil {
		checkRows("SoftmaxRowsF32", l, s, len(mask))
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
		m := float32(math.Inf(-1))
		for _, v := range r {
			m = max(m, v)
		}
		for j := range r {
			r[j] -= m
		}
		ExpF32(r, r)
		var sum float32
		for _, v := range r {
			sum += v
		}
		inv := 1 / sum
		for j := range r {
			r[j] *= inv
		}
	}
}

// SoftmaxBwdRowsF32 is the softmax's backward in place over the l rows of
// dp (l×s, the gradient of the probabilities p): dp = p ⊙ (dp - Σ_j dp·p);
// with causal, entries j > i become 0.
func SoftmaxBwdRowsF32(dp, p []float32, l, s int, causal bool) {
	checkRows("SoftmaxBwdRowsF32", l, s, len(dp), len(p))
	for i := range l {
		n := s
		if causal {
			n = min(i+1, s)
		}
		pr, dr := p[i*s:i*s+n], dp[i*s:(i+1)*s]
		var dot float32
		for j, pv := range pr {
			dot += pv * dr[j]
		}
		for j, pv := range pr {
			dr[j] = pv * (dr[j] - dot)
		}
		clear(dr[n:])
	}
}

// AddRowsF32 adds the rows of x (rows×cols) to d (cols), one row after
// another: d[c] += Σ_r x[r·cols+c], the same bits as a plain loop.
func AddRowsF32(d, x []float32, rows, cols int) {
	checkRows("AddRowsF32", rows, cols, len(x))
	checkRows("AddRowsF32", 1, cols, len(d))
	for r := range rows {
		for c, v := range x[r*cols : (r+1)*cols] {
			d[c] += v
		}
	}
}

// softmaxRowF32 is softmaxRowGo: this build has no C kernels.
func softmaxRowF32(p, x []float32) (m, sum float64) { return softmaxRowGo(p, x) }

// roundBF16s is RoundBF16Slice's kernel (dst may be src).
func roundBF16s(dst, src []float32) {
	for i, v := range src {
		dst[i] = RoundBF16(v)
	}
}
