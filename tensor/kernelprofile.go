package tensor

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// A KernelProfile accumulates, per kernel and shape, the calls, wall time
// and floating-point work of the host's compute kernels: every matrix
// product (Gemm, Gemm64, GemmBF16, and so Linear and attention), every
// convolution pass (Conv2dForward, Conv2dBackwardData,
// Conv2dBackwardWeights) and every head of the fused attention's AVX-512
// kernel (FlashAttention, FlashAttentionBackward; its tiled path is
// counted by its products). Everything else a training step does (norms,
// activations, pooling, the optimizer, collectives, the framework itself)
// is the step's time minus the kernels'. That split is the yardstick for a
// model's speed: the kernels' own rate at the model's shapes is the most
// the step can reach, whatever the rest costs; torch.profiler's table of
// aten::mm and aten::convolution is the same idea.
//
// It covers host kernels only; a device's kernels run asynchronously on
// its streams and are timed there (cuda events), not here. Kernels that
// run on other goroutines while it records are counted too: the time is
// each call's own, so kernels running in parallel add up to more than the
// wall time.
type KernelProfile struct {
	mu    sync.Mutex
	stats map[kernelKey]*KernelStat
}

// KernelStat is one kernel at one shape.
type KernelStat struct {
	Kernel string        // "sgemm", "dgemm", "bf16gemm", "conv_fwd", "conv_fwd_relu", "conv_bwd_data", "conv_bwd_weights", "flash_fwd", "flash_bwd" (+ "_bf16")
	Shape  string        // "MxNxK" with the transposes ("NT": B transposed), the convolution's shape, or an attention head's ("head T1024 D64 causal")
	Calls  int64         // calls recorded
	Time   time.Duration // their wall time, summed
	FLOPs  float64       // their floating-point operations (a multiply-add counts 2)
}

// GFLOPS is the kernel's rate over its calls (0 when it took no time).
func (s KernelStat) GFLOPS() float64 {
	if s.Time <= 0 {
		return 0
	}
	return s.FLOPs / s.Time.Seconds() / 1e9
}

// kernelKey identifies a kernel and shape by value, so that a call costs a
// map lookup and the shape is formatted once, when first seen.
type kernelKey struct {
	kernel         string
	m, n, k        int  // a product's sizes (an attention head's: T, T, D)
	transA, transB bool // and transposes (an attention head's: causal)
	conv           Conv2dShape
	attn           bool // one head of the fused attention
}

func (k kernelKey) shape() string {
	if k.attn {
		mask := "full"
		if k.transB {
			mask = "causal"
		}
		return fmt.Sprintf("head T%d D%d %s", k.m, k.k, mask)
	}
	if k.conv.N == 0 {
		return fmt.Sprintf("%dx%dx%d %s%s", k.m, k.n, k.k, transName(k.transA), transName(k.transB))
	}
	c := &k.conv
	return fmt.Sprintf("N%d C%d %dx%d -> O%d %dx%d k%dx%d s%d p%d d%d g%d", c.N, c.C, c.H, c.W, c.O, c.OH, c.OW,
		c.KH, c.KW, c.StrideH, c.PadTop, c.DilationH, c.Groups)
}

// ErrProfiling is returned by KernelProfile.Start while another profile
// records: kernels have one recorder at a time, as runtime/pprof's CPU
// profile.
var ErrProfiling = errors.New("tensor: a kernel profile is already recording")

// NewKernelProfile returns an empty profile; Start begins recording into it.
func NewKernelProfile() *KernelProfile {
	return &KernelProfile{stats: map[kernelKey]*KernelStat{}}
}

// Start makes p the recorder of every host kernel call until the returned
// stop function is called. A profile can be started and stopped many
// times (a trainer records its measured steps, not evaluation); the
// figures add up. It fails with ErrProfiling while another profile records.
func (p *KernelProfile) Start() (stop func(), err error) {
	if !kernelRecorder.CompareAndSwap(nil, p) {
		return nil, ErrProfiling
	}
	var once sync.Once
	return func() { once.Do(func() { kernelRecorder.CompareAndSwap(p, nil) }) }, nil
}

// Stats returns the figures so far, the most time-consuming first.
func (p *KernelProfile) Stats() []KernelStat {
	p.mu.Lock()
	out := make([]KernelStat, 0, len(p.stats))
	for _, s := range p.stats {
		out = append(out, *s)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Kernel+out[i].Shape < out[j].Kernel+out[j].Shape
	})
	return out
}

// Total sums Stats: every kernel's calls, time and work.
func (p *KernelProfile) Total() KernelStat {
	t := KernelStat{Kernel: "all"}
	for _, s := range p.Stats() {
		t.Calls += s.Calls
		t.Time += s.Time
		t.FLOPs += s.FLOPs
	}
	return t
}

func (p *KernelProfile) add(k kernelKey, flops float64, d time.Duration) {
	p.mu.Lock()
	s := p.stats[k]
	if s == nil {
		s = &KernelStat{Kernel: k.kernel, Shape: k.shape()}
		p.stats[k] = s
	}
	s.Calls++
	s.Time += d
	s.FLOPs += flops
	p.mu.Unlock()
}

// recorder returns the recording profile, nil when none records: one
// atomic load on every kernel call.
func recorder() *KernelProfile { return kernelRecorder.Load() }

// profileGemm records a product of op(A) m×k by op(B) k×n that started at
// t0.
func profileGemm(p *KernelProfile, kernel string, transA, transB bool, m, n, k int, t0 time.Time) {
	d := time.Since(t0)
	p.add(kernelKey{kernel: kernel, m: m, n: n, k: k, transA: transA, transB: transB}, 2*float64(m)*float64(n)*float64(k), d)
}

// profileAttentionHead records one head of the fused attention that
// started at t0: its products, each 2·D multiply-adds a visible (query,
// key) pair, the lower triangle T(T+1)/2 of them when causal (the kernel
// skips the rest): the forward's two (Q·Kᵀ, P·V), the backward's five
// (Q·Kᵀ again, dO·Vᵀ, dS·K, dSᵀ·Q, Pᵀ·dO). The work between them (e**x,
// the online softmax) is the kernel's own cost, as a convolution's
// packing is.
func profileAttentionHead(p *KernelProfile, backward, causal, bf16 bool, t, d int, t0 time.Time) {
	dur := time.Since(t0)
	kernel, products := "flash_fwd", 2.0
	if backward {
		kernel, products = "flash_bwd", 5.0
	}
	if bf16 {
		kernel += "_bf16"
	}
	pairs := float64(t) * float64(t)
	if causal {
		pairs = float64(t) * float64(t+1) / 2
	}
	p.add(kernelKey{kernel: kernel, m: t, n: t, k: d, transB: causal, attn: true}, products*2*float64(d)*pairs, dur)
}

func transName(t bool) string {
	if t {
		return "T"
	}
	return "N"
}

// profileConv records one convolution pass (each pass of forward, backward
// data and backward weights is the same work) that started at t0.
func profileConv(p *KernelProfile, pass string, s *Conv2dShape, t0 time.Time) {
	d := time.Since(t0)
	kernel := "conv_" + pass
	if s.BF16 {
		kernel += "_bf16"
	}
	p.add(kernelKey{kernel: kernel, conv: *s}, s.flops(), d)
}

// kernelRecorder is the profile recording the host's kernels, if any. Like
// host (the allocator), it is package state only because the host's
// kernels are one per process and no call into them carries a context.
var kernelRecorder atomic.Pointer[KernelProfile]
