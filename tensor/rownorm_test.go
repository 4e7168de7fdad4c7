package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The row kernels against float64 references of the formulas they
// document, over widths that leave every lane count a remainder (1, 7, 17,
// 128, 129), with and without the affine parameters: each output within a
// few float32 ulps of the reference.

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return x
}

// within asserts |got - want| <= ulps·ulp(want) + abs.
func within(t *testing.T, got []float32, want []float64, ulps, abs float64, what string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i, w := range want {
		ulp := float64(math.Nextafter32(float32(math.Abs(w)), float32(math.Inf(1)))) - math.Abs(float64(float32(w)))
		if d := math.Abs(float64(got[i]) - w); d > ulps*ulp+abs {
			t.Fatalf("%s[%d] = %v, want %v (off by %.3g, %.1f ulps)", what, i, got[i], w, d, d/ulp)
		}
	}
}

func TestLayerNormF32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{1, 7, 17, 128, 129} {
		for _, affine := range []bool{false, true} {
			rows, eps := 5, 1e-5
			x := randF32(rng, rows*d, 3)
			x[0] += 100 // a row with a large mean: the variance must not cancel
			var w, b []float32
			if affine {
				w, b = randF32(rng, d, 2), randF32(rng, d, 1)
			}
			y, xh, rstd := make([]float32, rows*d), make([]float32, rows*d), make([]float32, rows)
			LayerNormRows(y, xh, rstd, x, w, b, rows, d, eps)

			gy := randF32(rng, rows*d, 1)
			dx := make([]float32, rows*d)
			var dw, db []float32
			if affine {
				dw, db = make([]float32, d), make([]float32, d)
				dw[0], db[0] = 1, -1 // accumulated into, not overwritten
			}
			LayerNormRowsBackward(dx, dw, db, gy, xh, w, rstd, rows, d)

			wantY, wantH, wantDX := make([]float64, rows*d), make([]float64, rows*d), make([]float64, rows*d)
			var wantDW, wantDB []float64
			if affine {
				wantDW, wantDB = make([]float64, d), make([]float64, d)
				wantDW[0], wantDB[0] = 1, -1
			}
			for r := range rows {
				row := x[r*d : (r+1)*d]
				mean, vr := 0.0, 0.0
				for _, v := range row {
					mean += float64(v)
				}
				mean /= float64(d)
				for _, v := range row {
					vr += (float64(v) - mean) * (float64(v) - mean)
				}
				// The statistics are kept as float32, as torch's, and xhat
				// comes from the kept ones (the backward recomputes it).
				rs := float64(float32(1 / math.Sqrt(vr/float64(d)+eps)))
				assert.Equal(t, float32(rs), rstd[r])
				mean = float64(float32(mean))
				s1, s2 := 0.0, 0.0
				for i, v := range row {
					h := (float64(v) - mean) * rs
					wantH[r*d+i], wantY[r*d+i] = h, h
					gh := float64(gy[r*d+i])
					if affine {
						wantY[r*d+i] = float64(float32(h))*float64(w[i]) + float64(b[i])
						wantDW[i] += float64(gy[r*d+i]) * float64(xh[r*d+i])
						wantDB[i] += float64(gy[r*d+i])
						gh *= float64(w[i])
					}
					s1 += gh
					s2 += gh * float64(xh[r*d+i])
				}
				s1, s2 = s1/float64(d), s2/float64(d)
				for i := range row {
					gh := float64(gy[r*d+i])
					if affine {
						gh *= float64(w[i])
					}
					wantDX[r*d+i] = rs * (gh - s1 - float64(xh[r*d+i])*s2)
				}
			}
			within(t, xh, wantH, 1, 0, "xhat")
			within(t, y, wantY, 2, 1e-7, "y")
			within(t, dx, wantDX, 2, 1e-6, "dx")
			if affine {
				within(t, dw, wantDW, 4, 1e-6, "dw")
				within(t, db, wantDB, 4, 1e-6, "db")
			}
		}
	}
	assert.Panics(t, func() {
		LayerNormRows(make([]float32, 3), make([]float32, 4), make([]float32, 1), make([]float32, 4), nil, nil, 1, 4, 1e-5)
	},
		"a short output buffer")
}

func TestSoftmaxRowsF32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []int{1, 7, 17, 64, 65} {
		for _, causal := range []bool{false, true} {
			for _, masked := range []bool{false, true} {
				l := s + 2
				x := randF32(rng, l*s, 8)
				var mask []float32
				if masked {
					mask = randF32(rng, l*s, 2)
					mask[0] = float32(math.Inf(-1)) // a key no query may see
				}
				p := append([]float32(nil), x...)
				SoftmaxRows(p, mask, l, s, causal)
				want := make([]float64, l*s)
				for i := range l {
					n := s
					if causal {
						n = min(i+1, s)
					}
					m, sum := math.Inf(-1), 0.0
					for j := range n {
						v := float64(x[i*s+j])
						if mask != nil {
							v = float64(x[i*s+j] + mask[i*s+j])
						}
						want[i*s+j] = v
						m = max(m, v)
					}
					for j := range n {
						want[i*s+j] = math.Exp(want[i*s+j] - m)
						sum += want[i*s+j]
					}
					for j := range n {
						want[i*s+j] /= sum
					}
				}
				if masked && s == 1 {
					// Row 0 has its only key masked: NaN, as torch.
					require.True(t, math.IsNaN(float64(p[0])), "a fully masked row is NaN, got %v", p[0])
					p[0], want[0] = 0, 0
				}
				within(t, p, want, 8, 1e-9, "softmax") // float32 exp, sum and reciprocal: a few roundings

				dp := randF32(rng, l*s, 1)
				wantG, tol := make([]float64, l*s), make([]float64, l*s)
				for i := range l {
					n := s
					if causal {
						n = min(i+1, s)
					}
					dot, absDot := 0.0, 0.0
					for j := range n {
						dot += float64(p[i*s+j]) * float64(dp[i*s+j])
						absDot += math.Abs(float64(p[i*s+j]) * float64(dp[i*s+j]))
					}
					for j := range n {
						wantG[i*s+j] = float64(p[i*s+j]) * (float64(dp[i*s+j]) - dot)
						// dp - dot may cancel, so the bound scales with the
						// terms, not with the result: a float32 sum of n
						// products errs by up to about n·u·Σ|p·dp|.
						tol[i*s+j] = float64(n+4) * 0x1p-24 * math.Abs(float64(p[i*s+j])) * (math.Abs(float64(dp[i*s+j])) + absDot)
					}
				}
				SoftmaxRowsBackward(dp, p, l, s, causal)
				for i, w := range wantG {
					require.InDelta(t, w, dp[i], tol[i]+1e-12, "softmax backward[%d] (s=%d causal=%v)", i, s, causal)
				}
			}
		}
	}
	nan := []float32{1, float32(math.NaN()), 2}
	SoftmaxRows(nan, nil, 1, 3, false)
	for _, v := range nan {
		assert.True(t, math.IsNaN(float64(v)), "a row holding a NaN comes out NaN: %v", nan)
	}
}

func TestAddRowsF32MatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, cols := range []int{1, 7, 80, 129} {
		rows := 33
		x, d := randF32(rng, rows*cols, 3), randF32(rng, cols, 1)
		want := append([]float32(nil), d...)
		for r := range rows {
			for c := range cols {
				want[c] += x[r*cols+c]
			}
		}
		AddRows(d, x, rows, cols)
		assert.Equal(t, want, d, "cols=%d: the same bits as the row-by-row loop", cols)
	}
}

func TestSoftmaxRowF32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// 16, 80 and 50304 (GPT-2's padded head) fill AVX-512's 16-wide loop
	// exactly, 7 and 129 leave tails.
	for _, c := range []int{1, 7, 16, 80, 129, 50304} {
		x := randF32(rng, c, 20)
		x[0] = float32(math.Inf(-1)) // a logit that can never win
		p := make([]float32, c)
		m, s := softmaxRow(p, x)
		wm, ws := math.Inf(-1), 0.0
		for _, v := range x {
			wm = max(wm, float64(v))
		}
		want := make([]float64, c)
		for j, v := range x {
			want[j] = math.Exp(float64(v) - wm)
			ws += want[j]
		}
		for j := range want {
			want[j] /= ws
		}
		assert.Equal(t, wm, m, "c=%d: the maximum", c)
		assert.InDelta(t, ws, s, 1e-9*ws, "c=%d: the sum", c)
		within(t, p, want, 2, 1e-30, "softmax row") // e is rounded to float32, then e·(1/Σ) again
		assert.InDelta(t, math.Log(ws)+wm, math.Log(s)+m, 1e-9, "c=%d: the log-sum-exp", c)
	}
	p := make([]float32, 3)
	m, s := softmaxRow(p, []float32{1, float32(math.NaN()), 2})
	assert.True(t, math.IsNaN(m+math.Log(s)) && math.IsNaN(float64(p[0])), "a NaN logit: NaN out, got %v %v %v", m, s, p)
	// A NaN inside the vector loop's part of a row, and one in its tail.
	for _, at := range []int{5, 37} {
		x := randF32(rng, 40, 3)
		x[at] = float32(math.NaN())
		p := make([]float32, 40)
		m, s := softmaxRow(p, x)
		assert.True(t, math.IsNaN(m+math.Log(s)), "NaN at %d: the log-sum-exp is NaN, got %v %v", at, m, s)
		for j, v := range p {
			require.True(t, math.IsNaN(float64(v)), "NaN at %d: p[%d] = %v, want NaN", at, j, v)
		}
	}
}

// BenchmarkSoftmaxRowGPT2Head: the cross-entropy's softmax over one row of
// GPT-2's padded head (50304 logits), float32 with double accumulation.
func BenchmarkSoftmaxRowGPT2Head(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := randF32(rng, 50304, 5)
	p := make([]float32, len(x))
	b.SetBytes(int64(8 * len(x)))
	for b.Loop() {
		softmaxRow(p, x)
	}
}

func TestRoundBF16SliceMatchesRoundBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := randF32(rng, 1000, 1e3)
	x = append(x, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), // ties: to even, both ways
		math.Float32frombits(0x7f7fffff), math.Float32frombits(0x00000001), math.Float32frombits(0xff800001))
	y := make([]float32, len(x))
	RoundBF16Slice(y, x)
	for i, v := range x {
		w := RoundBF16(v)
		assert.Equal(t, math.Float32bits(w), math.Float32bits(y[i]), "element %d (%#08x)", i, math.Float32bits(v))
	}
	RoundBF16Slice(x, x) // in place
	assert.Equal(t, y[:10], x[:10])
}

// LayerNormRowsStats and LayerNormRowsBackwardFromX (what autograd's
// LayerNorm keeps: x, mean and rstd) give LayerNormRows' and
// LayerNormRowsBackward's results bit for bit, xhat being recomputed to the
// bits the forward would have kept: over widths with every lane remainder,
// affine and not, dw and db accumulated into, dx wanted or not, in float32
// (the C kernels where the build has them) and float64 (the Go loops).
func TestLayerNormFromStatsMatchesXhat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{1, 7, 17, 128, 129} {
		for _, affine := range []bool{false, true} {
			rows := 6
			x := randF32(rng, rows*d, 3)
			x[0] += 100
			var w, b []float32
			if affine {
				w, b = randF32(rng, d, 2), randF32(rng, d, 1)
			}
			gy := randF32(rng, rows*d, 1)
			layerNormFromStatsCase(t, d, rows, x, w, b, gy)
			x64, gy64 := make([]float64, len(x)), make([]float64, len(gy))
			for i := range x {
				x64[i], gy64[i] = float64(x[i]), float64(gy[i])
			}
			var w64, b64 []float64
			for i := range w {
				w64, b64 = append(w64, float64(w[i])), append(b64, float64(b[i]))
			}
			layerNormFromStatsCase(t, d, rows, x64, w64, b64, gy64)
		}
	}
}

func layerNormFromStatsCase[T float](t *testing.T, d, rows int, x, w, b, gy []T) {
	t.Helper()
	const eps = 1e-5
	y1, xh, rs1 := make([]T, rows*d), make([]T, rows*d), make([]T, rows)
	LayerNormRows(y1, xh, rs1, x, w, b, rows, d, eps)
	y2, mean, rs2 := make([]T, rows*d), make([]T, rows), make([]T, rows)
	LayerNormRowsStats(y2, mean, rs2, x, w, b, rows, d, eps)
	require.Equal(t, y1, y2, "y, d %d", d)
	require.Equal(t, rs1, rs2, "rstd, d %d", d)
	for _, wantDX := range []bool{true, false} {
		var dx1, dx2, dw1, dw2, db1, db2 []T
		if wantDX {
			dx1, dx2 = make([]T, rows*d), make([]T, rows*d)
		}
		if w != nil {
			dw1, dw2, db1, db2 = make([]T, d), make([]T, d), make([]T, d), make([]T, d)
			dw1[0], dw2[0], db1[0], db2[0] = 1, 1, -1, -1
		}
		LayerNormRowsBackward(dx1, dw1, db1, gy, xh, w, rs1, rows, d)
		LayerNormRowsBackwardFromX(dx2, dw2, db2, gy, x, w, mean, rs2, rows, d)
		require.Equal(t, dx1, dx2, "dx, d %d", d)
		require.Equal(t, dw1, dw2, "dw, d %d", d)
		require.Equal(t, db1, db2, "db, d %d", d)
	}
}
