package autograd

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// maxRelDiff is max_i |a_i - b_i| / (1 + |b_i|).
func maxRelDiff(a, b []float64) float64 {
	worst := 0.0
	for i := range a {
		worst = max(worst, math.Abs(a[i]-b[i])/(1+math.Abs(b[i])))
	}
	return worst
}

// runBoth runs FlashSelfAttention and SelfAttention on copies of qkv with
// the same upstream gradient and returns their outputs and qkv gradients.
func runBoth(t *testing.T, qkv *tensor.Tensor, heads int, o AttentionOptions, seed uint64) (yf, yu, gf, gu []float64) {
	t.Helper()
	xf, xu := Param(qkv.Clone()), Param(qkv.Clone())
	f, u := FlashSelfAttention(xf, heads, o), SelfAttention(xu, heads, o)
	require.Equal(t, u.Value.Shape(), f.Value.Shape())
	w := tensor.AsType(randT(seed, 1, 0, u.Value.Shape()...), qkv.DType())
	require.NoError(t, f.BackwardWith(w))
	require.NoError(t, u.BackwardWith(w))
	return toF64(f.Value), toF64(u.Value), toF64(xf.Grad), toF64(xu.Grad)
}

// FlashSelfAttention gives SelfAttention's values and gradients within
// float32 rounding: one tile (T = 1, odd D), several tiles with T a
// multiple of neither tile size, GPT-2's D = 64, causal and not.
func TestFlashSelfAttentionMatchesSelfAttention(t *testing.T) {
	for _, c := range []struct{ b, t, heads, dh int }{
		{2, 1, 2, 8}, {1, 5, 3, 7}, {2, 70, 2, 64}, {1, 131, 2, 5}, {1, 200, 1, 64},
	} {
		for _, causal := range []bool{true, false} {
			t.Run(fmt.Sprintf("B%dT%dH%dD%d/causal=%v", c.b, c.t, c.heads, c.dh, causal), func(t *testing.T) {
				qkv := tensor.AsType(randT(uint64(c.t+c.dh), 1, 0, c.b, c.t, 3*c.heads*c.dh), tensor.Float32)
				yf, yu, gf, gu := runBoth(t, qkv, c.heads, AttentionOptions{Causal: causal}, 5)
				dy, dg := maxRelDiff(yf, yu), maxRelDiff(gf, gu)
				t.Logf("largest relative difference: values %.3g, gradients %.3g", dy, dg)
				require.Less(t, dy, 2e-6, "values")
				require.Less(t, dg, 1e-5, "gradients")
			})
		}
	}
}

// With a scale of its own, in float64: the same as SelfAttention to
// float64 rounding (the op takes its scale as float32, as the table entry
// does, so the scale is one float32 holds exactly).
func TestFlashSelfAttentionFloat64Scale(t *testing.T) {
	qkv := randT(8, 1, 0, 2, 67, 3*2*3)
	yf, yu, gf, gu := runBoth(t, qkv, 2, AttentionOptions{Causal: true, Scale: 0.75}, 9)
	require.Less(t, maxRelDiff(yf, yu), 1e-12)
	require.Less(t, maxRelDiff(gf, gu), 1e-12)
}

// Finite differences in float64 across several key and query tiles (T
// past both tile sizes), causal and not, and at T = 1.
func TestFlashSelfAttentionGradCheck(t *testing.T) {
	for _, c := range []struct{ b, t, heads, dh int }{{2, 1, 1, 3}, {2, 5, 2, 3}, {1, 131, 1, 2}} {
		for _, causal := range []bool{true, false} {
			t.Run(fmt.Sprintf("B%dT%dH%dD%d/causal=%v", c.b, c.t, c.heads, c.dh, causal), func(t *testing.T) {
				gradCheck(t, func(xs []*Variable) *Variable {
					return FlashSelfAttention(xs[0], c.heads, AttentionOptions{Causal: causal})
				}, randT(uint64(3+c.t), 1, 0, c.b, c.t, 3*c.heads*c.dh))
			})
		}
	}
}

// Under bf16 products the fused op rounds q, k and v, and each key
// tile's e**(s - running max) before the product with v, to bfloat16. At
// one tile (T below both tile sizes) the running maximum is the row's, so
// the reference rounds e**(s - max) and divides by the unrounded sum, in
// float64 otherwise; float32 products are visibly off it, so that the test
// cannot pass on them. (SelfAttention rounds the normalized
// probabilities: the two differ by bfloat16 roundings.)
func TestFlashSelfAttentionBF16Products(t *testing.T) {
	const b, tt, heads, dh = 2, 40, 2, 16
	e := heads * dh
	qkv := tensor.AsType(randT(11, 1, 0, b, tt, 3*e), tensor.Float32)
	x := qkv.F32()
	rb := func(v float64) float64 { return float64(tensor.RoundBF16(float32(v))) }
	scale := 1 / math.Sqrt(dh)
	ref := make([]float64, b*tt*e)
	for bb := range b {
		for h := range heads {
			at := func(tok, part, d int) float64 { return float64(x[(bb*tt+tok)*3*e+part*e+h*dh+d]) }
			for i := range tt {
				s := make([]float64, i+1) // causal: keys 0..i
				m := math.Inf(-1)
				for j := range s {
					for d := range dh {
						s[j] += rb(at(i, 0, d)) * rb(at(j, 1, d))
					}
					s[j] = float64(float32(s[j] * scale))
					m = max(m, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for d := range dh {
					o := 0.0
					for j := range s {
						o += rb(float64(float32(s[j]))) * rb(at(j, 2, d))
					}
					ref[(bb*tt+i)*e+h*dh+d] = o / sum
				}
			}
		}
	}
	bf := AttentionOptions{Causal: true, Precision: tensor.PrecisionBFloat16}
	y16 := FlashSelfAttention(Const(qkv), heads, bf)
	y32 := FlashSelfAttention(Const(qkv), heads, AttentionOptions{Causal: true})
	d16, d32 := maxRelDiff(toF64(y16.Value), ref), maxRelDiff(toF64(y32.Value), ref)
	t.Logf("largest difference from the bf16-operand reference: bf16 products %.3g, float32 products %.3g", d16, d32)
	require.Less(t, d16, 2e-5, "bf16 attention against the reference")
	require.Greater(t, d32, 20*d16, "float32 products must be visibly off the bf16 reference")
}

// The bf16 backward rounds what SelfAttention's bf16 backward rounds (the
// normalized probabilities, the output gradient, v, and the scores'
// gradient before its products with q and k). The value gradient
// round(p)ᵀ·round(dy) is SelfAttention's but for the odd probability that
// rounds the other way (p is e**(s - lse) here, p/Σ there, equal only to
// float32 rounding), far closer than float32 products are; the query and
// key gradients differ from it by bfloat16 roundings (FlashAttention-2's
// D = Σ dy·y reads the fused forward's output).
func TestFlashSelfAttentionBF16Backward(t *testing.T) {
	const b, tt, heads, dh = 2, 150, 2, 64
	e := heads * dh
	qkv := tensor.AsType(randT(21, 1, 0, b, tt, 3*e), tensor.Float32)
	_, _, gf, gu := runBoth(t, qkv, heads, AttentionOptions{Causal: true, Precision: tensor.PrecisionBFloat16}, 6)
	_, _, g32, _ := runBoth(t, qkv, heads, AttentionOptions{Causal: true}, 6)
	part := func(g []float64, k int) []float64 { // k: 0 q, 1 k, 2 v
		var out []float64
		for r := 0; r < len(g); r += 3 * e {
			out = append(out, g[r+k*e:r+(k+1)*e]...)
		}
		return out
	}
	dv, dv32 := maxRelDiff(part(gf, 2), part(gu, 2)), maxRelDiff(part(g32, 2), part(gu, 2))
	dqk := max(maxRelDiff(part(gf, 0), part(gu, 0)), maxRelDiff(part(gf, 1), part(gu, 1)))
	t.Logf("from SelfAttention's bf16 gradient: value gradient %.3g (float32 products %.3g), query and key gradients %.3g", dv, dv32, dqk)
	require.Less(t, dv, 1e-3, "value gradient")
	require.Greater(t, dv32, 20*dv, "float32 products must be visibly off the bf16 value gradient")
	require.Less(t, dqk, 2e-2, "query and key gradients")
}

// The op never holds the [B, heads, T, T] probabilities: its forward and
// backward together peak below their size on the host allocator, where
// SelfAttention's forward alone holds them.
func TestFlashSelfAttentionPeakBelowProbabilities(t *testing.T) {
	const b, tt, heads, dh = 1, 512, 2, 16
	probs := int64(b * heads * tt * tt * 4)
	qkv := tensor.AsType(randT(2, 1, 0, b, tt, 3*heads*dh), tensor.Float32)
	w := tensor.AsType(randT(3, 1, 0, b, tt, heads*dh), tensor.Float32)
	peak := func(attn func(*Variable, int, AttentionOptions) *Variable) int64 {
		x := Param(qkv.Clone())
		h := tensor.Host()
		settleHostFrees(h)
		h.ResetPeak()
		base := h.Stats().Allocated
		require.NoError(t, attn(x, heads, AttentionOptions{Causal: true}).BackwardWith(w))
		return h.Stats().PeakAllocated - base
	}
	fused, unfused := peak(FlashSelfAttention), peak(SelfAttention)
	t.Logf("peak host bytes over forward and backward: fused %d, unfused %d; the probabilities are %d", fused, unfused, probs)
	require.Less(t, fused, probs/4)
	require.GreaterOrEqual(t, unfused, probs)
}

// settleHostFrees runs the garbage collector until the host allocator's
// live bytes stop moving: blocks of tensors that became garbage earlier go
// back through cleanups that run after a collection, on their own
// goroutine. Left to run during a peak measurement, they lower the live
// count below its base and hide part of the peak (the unfused side once
// measured 1.86 MB against its 2 MB of probabilities).
func settleHostFrees(h *tensor.HostAllocator) {
	prev, stable := h.Stats().Allocated, 0
	for range 100 {
		runtime.GC()
		for range 10 {
			runtime.Gosched() // the cleanup goroutine's turn
		}
		now := h.Stats().Allocated
		if now != prev {
			prev, stable = now, 0
			continue
		}
		if stable++; stable == 3 {
			return
		}
	}
}

func TestFlashSelfAttentionBadInputsPanic(t *testing.T) {
	require.Panics(t, func() { FlashSelfAttention(Const(randT(1, 1, 0, 2, 3, 12)), 5, AttentionOptions{}) })
	require.Panics(t, func() { FlashSelfAttention(Const(randT(1, 1, 0, 3, 12)), 2, AttentionOptions{}) })
	require.Panics(t, func() {
		FlashSelfAttention(Const(randT(1, 1, 0, 1, 3, 12)), 2, AttentionOptions{Mask: randT(2, 1, 0, 3, 3)})
	})
}

// BenchmarkFlashSelfAttention times forward and backward of GPT-2 124M's
// attention at T = 1024 (B = 2, 12 heads of 64), fused against
// SelfAttention, and reports the host allocator's peak over the step
// (peak-MiB: SelfAttention's includes the [B, 12, T, T] probabilities,
// 96 MiB) beside Go's B/op, on GODDP_NUM_THREADS threads (without it the
// heads spread over every CPU):
//
//	GODDP_NUM_THREADS=1 go test -run '^$' -bench FlashSelfAttention -benchtime 3x ./autograd/
func BenchmarkFlashSelfAttention(b *testing.B) {
	if n := tensor.ThreadsFromEnv(); n > 0 {
		prev := tensor.Threads()
		tensor.SetThreads(n)
		defer tensor.SetThreads(prev)
	}
	const batch, tt, heads, dh = 2, 1024, 12, 64
	qkv := tensor.Randn(tensor.NewRNG(1), tensor.Float32, batch, tt, 3*heads*dh)
	w := tensor.Randn(tensor.NewRNG(2), tensor.Float32, batch, tt, heads*dh)
	for _, c := range []struct {
		name string
		attn func(*Variable, int, AttentionOptions) *Variable
	}{{"fused", FlashSelfAttention}, {"unfused", SelfAttention}} {
		b.Run(c.name, func(b *testing.B) {
			x := Param(qkv)
			h := tensor.Host()
			var peak int64
			b.ReportAllocs()
			for b.Loop() {
				h.ResetPeak()
				base := h.Stats().Allocated
				if err := c.attn(x, heads, AttentionOptions{Causal: true}).BackwardWith(w); err != nil {
					b.Fatal(err)
				}
				peak = max(peak, h.Stats().PeakAllocated-base)
				x.Grad = nil
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		})
	}
}
