package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// torchSGD is torch 1.13's _single_tensor_sgd on the CPU for one element,
// operation by operation (its add with alpha a fused multiply-add; fma32
// rounds it once, as vfmadd does).
func torchSGD(w, g, buf float32, h SGDHyper) (float32, float32) {
	d := g
	if h.Maximize {
		d = -g
	}
	if h.WeightDecay != 0 {
		d = fma32(float32(h.WeightDecay), w, d)
	}
	b := d
	if !h.First {
		b = fma32(float32(1-h.Dampening), d, buf*float32(h.Momentum))
	}
	return fma32(float32(-h.LR), b, w), b
}

// SGDStep with momentum on float32 against torch's arithmetic, bit for bit,
// over several steps (the first one included) and the options that change
// it: weight decay, dampening, maximize. A fused kernel that contracted
// buf·momentum into the add, or the passes that rounded buf·(momentum-1)
// and lr·buf on their own, differ in the last bit of some elements.
func TestSGDMomentumMatchesTorchArithmetic(t *testing.T) {
	cfgs := []SGDHyper{
		{LR: 0.01, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3},
		{LR: 0.1, Momentum: 0.8, Dampening: 0.1, WeightDecay: 0.01, Maximize: true},
	}
	rng := NewRNG(7)
	for ci, cfg := range cfgs {
		for _, n := range []int{1, 17, 1000, 4099} {
			w := Randn(rng, Float32, n)
			buf := New(Float32, n)
			ww, wb := append([]float32(nil), w.F32()...), make([]float32, n)
			for step := range 4 {
				g := Randn(rng, Float32, n)
				h := cfg
				h.First = step == 0
				require.NoError(t, SGDStep(w, g, buf, h))
				for i := range n {
					ww[i], wb[i] = torchSGD(ww[i], g.F32()[i], wb[i], h)
				}
				where := fmt.Sprintf("config %d n %d step %d", ci, n, step)
				for i := range n {
					require.Equal(t, math.Float32bits(ww[i]), math.Float32bits(w.F32()[i]), "%s: w[%d]", where, i)
					require.Equal(t, math.Float32bits(wb[i]), math.Float32bits(buf.F32()[i]), "%s: buf[%d]", where, i)
				}
			}
		}
	}
}

// BenchmarkSGDMomentumStep is one SGD step with momentum over a convnet's
// Linear(3136, 1024) weight (3.2 M values, 12.8 MB a stream).
func BenchmarkSGDMomentumStep(b *testing.B) {
	const n = 3136 * 1024
	rng := NewRNG(1)
	w, g, buf := Randn(rng, Float32, n), Randn(rng, Float32, n), New(Float32, n)
	h := SGDHyper{LR: 0.01, Momentum: 0.9}
	for b.Loop() {
		if err := SGDStep(w, g, buf, h); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(5 * 4 * n)
}
