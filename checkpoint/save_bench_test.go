package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goddp/goddp/tensor"
)

// BenchmarkSave writes a checkpoint of GODDP_CKPT_MB megabytes (default
// 500: a model of 41.7M float32 parameters with AdamW's two moments) into
// GODDP_CKPT_DIR (default a temporary directory), as the trainer saves one:
// atomically (temporary file, fsync, rename). scripts/bench_ckpt.sh
// compares it with dd writing as many bytes to the same disk (issue 45's
// bar: less than 1.5x dd's time). The tensors are 148 of GPT-2's sizes'
// proportions, so the header and the per-tensor work are a real model's.
func BenchmarkSave(b *testing.B) {
	mb := 500
	if v, err := strconv.Atoi(os.Getenv("GODDP_CKPT_MB")); err == nil && v > 0 {
		mb = v
	}
	dir := os.Getenv("GODDP_CKPT_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	const tensors = 148
	per := mb << 20 / 4 / 3 / tensors // float32 elements per tensor, for weights and two moments
	c := &Checkpoint{Model: map[string]*tensor.Tensor{}, Optimizer: &OptimizerState{Kind: "AdamW", Tensors: map[string]*tensor.Tensor{}, Scalars: map[string]float64{"lr": 6e-4}}}
	rng := tensor.NewRNG(1)
	for i := range tensors {
		c.Model[fmt.Sprintf("transformer.h.%d.w", i)] = tensor.Rand(rng, tensor.Float32, per)
		c.Optimizer.Tensors[fmt.Sprintf("state.%d.exp_avg", i)] = tensor.Rand(rng, tensor.Float32, per)
		c.Optimizer.Tensors[fmt.Sprintf("state.%d.exp_avg_sq", i)] = tensor.Rand(rng, tensor.Float32, per)
	}
	path := filepath.Join(dir, "bench.safetensors")
	defer os.Remove(path)
	b.SetBytes(int64(per) * 4 * 3 * tensors)
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for range b.N {
		if err := Save(path, c); err != nil {
			b.Fatal(err)
		}
	}
	// The process's CPU time (user + system, every thread) per save: on a
	// machine shared with other jobs the wall time says more about them,
	// while this says what a save costs (hashing, copying into the page
	// cache, the fsync's writeback).
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
