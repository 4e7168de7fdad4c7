package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// poolInput is n normal values with ties and NaNs planted: every period
// values, the one at tie and the next are 1, the one at nan is NaN.
func poolInput(rng *RNG, n, period, tie, nan int) []float32 {
	x := Randn(rng, Float32, n).F32()
	for i := range x {
		switch i % period {
		case tie, tie + 1:
			x[i] = 1
		case nan:
			x[i] = float32(math.NaN())
		}
	}
	return x
}

// MaxPool2x2F32 against a plain loop with the rule it documents (the
// first maximum of the window in row-major order, the last NaN), over odd
// sizes (the last row or column dropped), ties and NaNs.
func TestMaxPool2x2F32(t *testing.T) {
	rng := NewRNG(4)
	for _, s := range [][3]int{{1, 2, 2}, {3, 5, 7}, {2, 28, 28}, {4, 14, 13}, {1, 1, 6}, {2, 6, 70}, {3, 4, 65}, {1, 2, 32}, {1, 2, 34}} {
		planes, h, w := s[0], s[1], s[2]
		x := poolInput(rng, planes*h*w, 17, 3, 11)
		oh, ow := h/2, w/2
		y, idx := make([]float32, planes*oh*ow), make([]int64, planes*oh*ow)
		MaxPool2x2F32(y, idx, x, planes, h, w)
		for p := range planes {
			for oy := range oh {
				for ox := range ow {
					xp := x[p*h*w:]
					bi := 2*oy*w + 2*ox
					best := xp[bi]
					for _, o := range []int{2*oy*w + 2*ox + 1, (2*oy+1)*w + 2*ox, (2*oy+1)*w + 2*ox + 1} {
						if v := xp[o]; v > best || v != v {
							best, bi = v, o
						}
					}
					k := (p*oh+oy)*ow + ox
					require.Equal(t, int64(bi), idx[k], "shape %v output %d", s, k)
					require.Equal(t, math.Float32bits(best), math.Float32bits(y[k]), "shape %v output %d", s, k)
				}
			}
		}
	}
}

// BenchmarkMaxPool2x2F32 pools the benchmark convnet's first activation
// ([64, 32, 28, 28]), from cache (one input, pooled again and again) and
// from memory (the next of poolSets inputs each time, 64 MB in all, as in
// a model, where the convolution before it wrote the input).
func BenchmarkMaxPool2x2F32(b *testing.B) {
	const planes, h, w = 64 * 32, 28, 28
	for _, c := range poolCases {
		b.Run(c.name, func(b *testing.B) {
			xs, ys, idxs := make([][]float32, c.sets), make([][]float32, c.sets), make([][]int64, c.sets)
			for i := range xs {
				xs[i] = Randn(NewRNG(uint64(i+1)), Float32, planes*h*w).F32()
				ys[i], idxs[i] = make([]float32, planes*h*w/4), make([]int64, planes*h*w/4)
			}
			i := 0
			for b.Loop() {
				MaxPool2x2F32(ys[i], idxs[i], xs[i], planes, h, w)
				i = (i + 1) % c.sets
			}
			b.SetBytes(int64(4 * (len(xs[0]) + 2*len(ys[0]))))
		})
	}
}

// poolCases are the pooling benchmarks' two cases: operands in cache, and
// rotating through sets that together exceed it.
var poolCases = []struct {
	name string
	sets int
}{{"cached", 1}, {"memory", 10}}

// MaxPool2x2BackwardF32 against the rule it documents, from indices the
// forward picked (ties and NaNs included), over odd sizes and rows wider
// and narrower than a vector: gx starts as NaN, so an element left
// unwritten shows.
func TestMaxPool2x2BackwardF32(t *testing.T) {
	rng := NewRNG(5)
	for _, s := range [][3]int{{1, 2, 2}, {3, 5, 7}, {2, 28, 28}, {4, 14, 13}, {1, 1, 6}, {2, 6, 70}, {3, 4, 65}, {1, 2, 32}, {1, 2, 34}, {2, 3, 1}} {
		planes, h, w := s[0], s[1], s[2]
		x := poolInput(rng, planes*h*w, 13, 2, 7)
		oh, ow := h/2, w/2
		y, idx := make([]float32, planes*oh*ow), make([]int64, planes*oh*ow)
		MaxPool2x2F32(y, idx, x, planes, h, w)
		gy := Randn(rng, Float32, planes*oh*ow).F32()
		gx := make([]float32, planes*h*w)
		for i := range gx {
			gx[i] = float32(math.NaN())
		}
		MaxPool2x2BackwardF32(gx, gy, idx, planes, h, w)
		want := make([]float32, planes*h*w)
		for p := range planes {
			for j := range oh * ow {
				want[p*h*w+int(idx[p*oh*ow+j])] = gy[p*oh*ow+j]
			}
		}
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(gx[i]), "shape %v element %d", s, i)
		}
	}
}

// BenchmarkMaxPool2x2BackwardF32 is the backward of the benchmark
// convnet's first pooling ([64, 32, 28, 28]), from cache and from memory
// as BenchmarkMaxPool2x2F32.
func BenchmarkMaxPool2x2BackwardF32(b *testing.B) {
	const planes, h, w = 64 * 32, 28, 28
	x := Randn(NewRNG(1), Float32, planes*h*w).F32()
	for _, c := range poolCases {
		b.Run(c.name, func(b *testing.B) {
			gxs, gys, idxs := make([][]float32, c.sets), make([][]float32, c.sets), make([][]int64, c.sets)
			for i := range gxs {
				gxs[i], gys[i], idxs[i] = make([]float32, len(x)), make([]float32, len(x)/4), make([]int64, len(x)/4)
				MaxPool2x2F32(gys[i], idxs[i], x, planes, h, w)
			}
			i := 0
			for b.Loop() {
				MaxPool2x2BackwardF32(gxs[i], gys[i], idxs[i], planes, h, w)
				i = (i + 1) % c.sets
			}
			b.SetBytes(int64(4 * (len(x) + 2*len(gys[0]))))
		})
	}
}

// The host's 2x2 max-pool backward writes every input element (the
// window's argmax gets the gradient, the rest and an odd size's last row
// and column 0), so MaxPool2dBackward hands it uninitialised memory: here
// NaN, against the general scatter over zeros, at odd and even sizes, in
// float64 (float32 runs MaxPool2x2BackwardF32, tested above).
func TestMaxPool2x2BackwardWritesAll(t *testing.T) {
	for _, d := range [][4]int{{2, 3, 5, 7}, {1, 2, 4, 6}, {1, 1, 3, 2}} {
		s := &Pool2dShape{N: d[0], C: d[1], H: d[2], W: d[3], KH: 2, KW: 2, StrideH: 2, StrideW: 2, OH: d[2] / 2, OW: d[3] / 2}
		x := Randn(NewRNG(uint64(d[3])), Float64, d[:]...)
		idx := make([]int64, s.N*s.C*s.OH*s.OW)
		y := make([]float64, len(idx))
		maxPoolFwd(s, y, x.F64(), idx)
		gy := make([]float64, len(idx))
		for i := range gy {
			gy[i] = float64(i + 1)
		}
		want, got := make([]float64, x.Numel()), make([]float64, x.Numel())
		for i := range got {
			got[i] = math.NaN()
		}
		maxPoolBwd(s, want, gy, idx)
		maxPool2x2Bwd(s, got, gy, idx)
		require.Equal(t, want, got, "shape %v", d)
	}
}
