package optim

import (
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// benchParams returns the 784-512-512-10 MLP's parameter shapes with grads.
func benchParams() []*autograd.Variable {
	shapes := [][]int{{512, 784}, {512}, {512, 512}, {512}, {10, 512}, {10}}
	ps := make([]*autograd.Variable, len(shapes))
	for i, s := range shapes {
		p := autograd.Param(tensor.New(tensor.Float32, s...))
		p.Grad = tensor.New(tensor.Float32, s...)
		for j := range p.Grad.F32() {
			p.Grad.F32()[j] = float32(j%7) * 1e-3
		}
		ps[i] = p
	}
	return ps
}

// BenchmarkStep times one optimizer step over the MLP benchmark's parameters
// (669,706 floats).
func BenchmarkStep(b *testing.B) {
	cases := []struct {
		name string
		make func([]*autograd.Variable) (Optimizer, error)
	}{
		{"sgd", func(ps []*autograd.Variable) (Optimizer, error) { return NewSGD(ps, SGDConfig{LR: 1e-3}) }},
		{"sgd_momentum", func(ps []*autograd.Variable) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 1e-3, Momentum: 0.9, WeightDecay: 1e-4})
		}},
		{"adamw", func(ps []*autograd.Variable) (Optimizer, error) { return NewAdamW(ps, DefaultAdamW()) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			opt, err := c.make(benchParams())
			if err != nil {
				b.Fatal(err)
			}
			if err := opt.Step(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := opt.Step(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time (all threads), steadier than wall time
// on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
