package tensor

import (
	"fmt"
	"math"
	"testing"
)

// naiveAttention is attention over qkv [B, T, 3, H, D] in float64 with the
// [T, T] probabilities formed whole: y [B, T, H, D], lse [B, H, T] and,
// for the output gradient dy, dqkv.
func naiveAttention(x, dy []float64, b, t, h, d int, scale float64, causal bool) (y, lse, dx []float64) {
	hd := h * d
	y, lse, dx = make([]float64, b*t*hd), make([]float64, b*h*t), make([]float64, len(x))
	at := func(bb, tok, part, hh, j int) int { return ((bb*t+tok)*3+part)*hd + hh*d + j }
	for bb := range b {
		for hh := range h {
			p := make([][]float64, t)
			for i := range t {
				p[i] = make([]float64, t)
				n := t
				if causal {
					n = i + 1
				}
				m := math.Inf(-1)
				for j := range n {
					s := 0.0
					for c := range d {
						s += x[at(bb, i, 0, hh, c)] * x[at(bb, j, 1, hh, c)]
					}
					p[i][j] = s * scale
					m = max(m, p[i][j])
				}
				sum := 0.0
				for j := range n {
					p[i][j] = math.Exp(p[i][j] - m)
					sum += p[i][j]
				}
				lse[(bb*h+hh)*t+i] = m + math.Log(sum)
				for j := range n {
					p[i][j] /= sum
				}
				for c := range d {
					o := 0.0
					for j := range n {
						o += p[i][j] * x[at(bb, j, 2, hh, c)]
					}
					y[(bb*t+i)*hd+hh*d+c] = o
				}
			}
			for i := range t {
				g := dy[(bb*t+i)*hd+hh*d:]
				dp := make([]float64, t)
				dot := 0.0
				for j := range t {
					for c := range d {
						dp[j] += g[c] * x[at(bb, j, 2, hh, c)]
					}
					dot += dp[j] * p[i][j]
				}
				for j := range t {
					ds := p[i][j] * (dp[j] - dot) * scale
					for c := range d {
						dx[at(bb, j, 2, hh, c)] += p[i][j] * g[c]
						dx[at(bb, i, 0, hh, c)] += ds * x[at(bb, j, 1, hh, c)]
						dx[at(bb, j, 1, hh, c)] += ds * x[at(bb, i, 0, hh, c)]
					}
				}
			}
		}
	}
	return y, lse, dx
}

// TestFlashAttentionMatchesNaive checks the host kernel, forward (y and
// lse) and backward, against attention formed whole in float64, at shapes
// that exercise one tile, several (T past both tile sizes, not a multiple
// of either), T = 1 and odd D, causal and not, in float32 and float64.
func TestFlashAttentionMatchesNaive(t *testing.T) {
	shapes := []struct{ b, t, h, d int }{{1, 1, 1, 3}, {2, 5, 3, 7}, {1, 200, 2, 16}, {2, 131, 1, 64}}
	for _, sh := range shapes {
		for _, causal := range []bool{true, false} {
			for _, dt := range []DType{Float32, Float64} {
				name := fmt.Sprintf("B%dT%dH%dD%d/causal=%v/%v", sh.b, sh.t, sh.h, sh.d, causal, dt)
				t.Run(name, func(t *testing.T) {
					rng := NewRNG(uint64(sh.t*7 + sh.d))
					qkv := rng.Uniform(dt, -1.5, 1.5, sh.b, sh.t, 3*sh.h*sh.d)
					dy := rng.Uniform(dt, -1, 1, sh.b, sh.t, sh.h*sh.d)
					scale := float32(1 / math.Sqrt(float64(sh.d)))
					x64, dy64 := AsType(qkv, Float64).F64(), AsType(dy, Float64).F64()
					wy, wl, wdx := naiveAttention(x64, dy64, sh.b, sh.t, sh.h, sh.d, float64(scale), causal)
					y, lse := FlashAttention(qkv, sh.b, sh.t, sh.h, sh.d, scale, causal, false)
					dx := FlashAttentionBackward(dy, qkv, y, lse, sh.b, sh.t, sh.h, sh.d, scale, causal, false)
					tol := 2e-5
					if dt == Float64 {
						tol = 1e-12
					}
					for _, c := range []struct {
						what      string
						got       *Tensor
						want      []float64
						wantShape []int
					}{{"y", y, wy, []int{sh.b, sh.t, sh.h * sh.d}}, {"lse", lse, wl, []int{sh.b, sh.h, sh.t}},
						{"dqkv", dx, wdx, qkv.Shape()}} {
						if fmt.Sprint(c.got.Shape()) != fmt.Sprint(c.wantShape) {
							t.Fatalf("%s shape %v, want %v", c.what, c.got.Shape(), c.wantShape)
						}
						g := AsType(c.got, Float64).F64()
						worst, at := 0.0, 0
						for i, w := range c.want {
							if e := math.Abs(g[i]-w) / (1 + math.Abs(w)); e > worst {
								worst, at = e, i
							}
						}
						if worst > tol {
							t.Errorf("%s[%d] = %v, want %v (relative error %.3g > %.3g)", c.what, at, g[at], c.want[at], worst, tol)
						}
					}
				})
			}
		}
	}
}
