package autograd

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/tensor"
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

// BenchmarkConvNetConvLayers times forward and backward of the two
// convolutions of the Fashion-MNIST convnet (examples/cnn) at batch 64:
// Conv2d(1,32,5,pad 2) on [64,1,28,28] (no input gradient: it is the first
// layer) and Conv2d(32,64,5,pad 2) on [64,32,14,14], each backward seeded
// with a fixed upstream gradient. scripts/bench_torch_conv.py times the same
// work in torch; compare at one thread, interleaved, under the bench lock:
//
//	GODDP_NUM_THREADS=1 go test -run '^$' -bench ConvNetConv ./autograd/
//	OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch_conv.py
func BenchmarkConvNetConvLayers(b *testing.B) {
	for _, p := range []tensor.Precision{tensor.PrecisionFloat32, tensor.PrecisionBFloat16} {
		b.Run(p.String(), func(b *testing.B) { benchConvNetConvLayers(b, p) })
	}
}

func benchConvNetConvLayers(b *testing.B, prec tensor.Precision) {
	if n := tensor.ThreadsFromEnv(); n > 0 {
		prev := tensor.Threads()
		tensor.SetThreads(n)
		defer tensor.SetThreads(prev)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const batch = 64
	x1 := Const(randF32(r, 1, batch, 1, 28, 28))
	w1, b1 := Param(randF32(r, 0.2, 32, 1, 5, 5)), Param(randF32(r, 0.2, 32))
	x2 := Param(randF32(r, 1, batch, 32, 14, 14))
	w2, b2 := Param(randF32(r, 0.03, 64, 32, 5, 5)), Param(randF32(r, 0.03, 64))
	gy1, gy2 := randF32(r, 1, batch, 32, 28, 28), randF32(r, 1, batch, 64, 14, 14)
	pad2 := ConvParams{Padding: [2]int{2, 2}, Precision: prec}
	step := func() {
		if err := Conv2d(x1, w1, b1, pad2).BackwardWith(gy1); err != nil {
			b.Fatal(err)
		}
		x2.Grad = nil
		if err := Conv2d(x2, w2, b2, pad2).BackwardWith(gy2); err != nil {
			b.Fatal(err)
		}
	}
	step()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		step()
	}
	cpu := processCPU() - cpu0
	// fwd 2*M*N*K per conv; backward dW the same, dX (conv2 only) the same.
	flops := 2.0 * batch * (2*32*28*28*25 + 3*64*14*14*800)
	b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
	// On a shared host wall time counts other processes' turns; CPU time
	// (all of this process's threads) does not.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(batch)*float64(b.N)/cpu.Seconds(), "samples/cpu-s")
}

// processCPU returns the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLinearLayers times a Linear's forward and backward (dx, dw, db
// accumulated into Grad buffers, as in training) at the examples' shapes:
// the convnet's Linear(3136, 1024) at batch 64, and a GPT MLP's
// Linear(128, 512) and Linear(512, 128) at 2048 tokens, in float32 and
// under autocast's bf16. Every gradient, the input's too, accumulates in a
// Grad buffer kept across steps, so the steady state allocates nothing
// the host cache does not serve. cpu-ns/op is the figure to compare on a
// shared host.
func BenchmarkLinearLayers(b *testing.B) {
	shapes := []struct {
		name         string
		n, in, out   int
		inputNeedsDx bool
	}{
		{"cnn_fc1_64x3136x1024", 64, 3136, 1024, false},
		{"gpt_fc1_2048x128x512", 2048, 128, 512, true},
		{"gpt_fc2_2048x512x128", 2048, 512, 128, true},
	}
	for _, s := range shapes {
		for _, p := range []tensor.Precision{tensor.PrecisionFloat32, tensor.PrecisionBFloat16} {
			b.Run(s.name+"/"+p.String(), func(b *testing.B) {
				if n := tensor.ThreadsFromEnv(); n > 0 {
					prev := tensor.Threads()
					tensor.SetThreads(n)
					defer tensor.SetThreads(prev)
				}
				r := rand.New(rand.NewPCG(5, 6))
				x := Const(randF32(r, 1, s.n, s.in))
				if s.inputNeedsDx {
					x = Param(randF32(r, 1, s.n, s.in))
				}
				w, bias := Param(randF32(r, 0.05, s.out, s.in)), Param(randF32(r, 0.05, s.out))
				gy := randF32(r, 1, s.n, s.out)
				step := func() {
					y := LinearWith(x, w, bias, p)
					if err := y.BackwardWith(gy); err != nil {
						b.Fatal(err)
					}
					y.FreeGraph()
				}
				step()
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					step()
				}
				cpu := processCPU() - cpu0
				flops := 6.0 * float64(s.n) * float64(s.in) * float64(s.out)
				if !s.inputNeedsDx {
					flops = 4.0 * float64(s.n) * float64(s.in) * float64(s.out)
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "GFLOPS/cpu")
			})
		}
	}
}

// BenchmarkDropout is the forward of the benchmark convnet's Dropout(0.4)
// on its [64, 1024] activation: one torch-compatible draw per element. The
// graph ends in a sum, so that FreeGraph recycles the Dropout's output as
// a training step's does.
func BenchmarkDropout(b *testing.B) {
	x := Param(randF32(rand.New(rand.NewPCG(1, 2)), 1, 64, 1024))
	rng := tensor.NewRNG(1)
	for b.Loop() {
		SumAll(Dropout(x, 0.4, rng, true)).FreeGraph()
	}
}
