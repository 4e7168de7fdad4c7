package autograd

import (
	"math/rand/v2"
	"testing"

	"goddp/tensor"
)

func randF32(r *rand.Rand, scale float32, shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.Float32, shape...)
	d := t.F32()
	for i := range d {
		d[i] = (r.Float32()*2 - 1) * scale
	}
	return t
}

// BenchmarkAutogradMLPStep times one training step of a 784-512-512-10 MLP
// on a batch of 64 (forward, cross-entropy, backward, an in-place SGD update
// and ZeroGrad), the shape of the nn team's BenchmarkTrainStep/mlp. Steady
// state must not allocate parameter-sized buffers: allocs/op and B/op show it.
func BenchmarkAutogradMLPStep(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{784, 512, 512, 10}
	var params []*Variable
	for l := 0; l < 3; l++ {
		params = append(params, Param(randF32(r, 0.05, sizes[l+1], sizes[l])), Param(randF32(r, 0.05, sizes[l+1])))
	}
	const batch = 64
	x := Const(randF32(r, 1, batch, 784))
	target := make([]int, batch)
	for i := range target {
		target[i] = r.IntN(10)
	}
	step := func() {
		h := x
		for l := 0; l < 3; l++ {
			h = Linear(h, params[2*l], params[2*l+1])
			if l < 2 {
				h = ReLU(h)
			}
		}
		if err := CrossEntropy(h, target, ReductionMean).Backward(); err != nil {
			b.Fatal(err)
		}
		for _, p := range params {
			w, g := p.Value.F32(), p.Grad.F32()
			for i := range w {
				w[i] -= 0.01 * g[i]
			}
			p.ZeroGrad()
		}
	}
	step() // allocate the Grad buffers
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
