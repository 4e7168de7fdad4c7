package nn

import (
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// BenchmarkTrainStep measures one full single-process training step
// (ZeroGrad, forward, loss, backward, SGD step) on a fixed batch, the same
// work scripts/bench_torch_step.py times for torch:
//
//	mlp:    784-512-512-10 with ReLU, batch 64, SGD lr 1e-3, cross-entropy
//	linear: Linear(20, 1), batch 32, SGD lr 1e-3, MSE
//
// Threads come from GODDP_NUM_THREADS (then OMP_NUM_THREADS); compare with
// torch at the same count, in the same run:
//
//	GODDP_NUM_THREADS=2 go test -run '^$' -bench TrainStep -benchmem ./nn/
//	GODDP_NUM_THREADS=2 /usr/bin/python3 scripts/bench_torch_step.py
func BenchmarkTrainStep(b *testing.B) {
	if n := tensor.ThreadsFromEnv(); n > 0 {
		tensor.SetThreads(n)
	}
	b.Run("mlp", func(b *testing.B) {
		rng := tensor.NewRNG(0)
		model := NewSequential(
			NewLinear(rng, 784, 512), NewReLU(),
			NewLinear(rng, 512, 512), NewReLU(),
			NewLinear(rng, 512, 10))
		x := tensor.Rand(rng, tensor.Float32, 64, 784)
		y := make([]int, 64)
		for i := range y {
			y[i] = int(rng.Float64() * 10)
		}
		var lossFn CrossEntropyLoss
		benchSteps(b, model, 64, func() *autograd.Variable {
			return lossFn.Forward(model.Forward(autograd.Const(x)), y)
		})
	})
	b.Run("linear", func(b *testing.B) {
		rng := tensor.NewRNG(0)
		model := NewLinear(rng, 20, 1)
		x := tensor.Rand(rng, tensor.Float32, 32, 20)
		y := autograd.Const(tensor.Rand(rng, tensor.Float32, 32, 1))
		var lossFn MSELoss
		benchSteps(b, model, 32, func() *autograd.Variable {
			return lossFn.Forward(model.Forward(autograd.Const(x)), y)
		})
	})
}

func benchSteps(b *testing.B, model Module, batch int, loss func() *autograd.Variable) {
	opt, err := optim.NewSGD(Parameters(model), optim.SGDConfig{LR: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	step := func() {
		opt.ZeroGrad()
		l := loss()
		if err := l.Backward(); err != nil {
			b.Fatal(err)
		}
		l.FreeGraph() // the step's intermediates go back to the cache
		if err := opt.Step(); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ { // reach steady state: gradient buffers exist
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "samples/s")
	// CPU seconds of the whole process (all threads) per step: on a shared,
	// oversubscribed machine this tracks the work done better than wall time.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
