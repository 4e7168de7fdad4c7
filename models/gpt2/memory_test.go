package gpt2

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// TestStepPeakRSS is a probe, not a check: with GPT2_STEP_RSS_LAYERS set
// (4, or 12 for GPT-2 124M) it trains two steps of GPT-2 of that depth at
// d=768, T=1024, batch 2 (forward, loss, backward, AdamW) and logs the
// process's peak RSS and the host allocator's peak after each. It needs
// 3-9 GB and minutes; run it alone:
//
//	GODDP_NUM_THREADS=1 GPT2_STEP_RSS_LAYERS=4 go test -count=1 -run TestStepPeakRSS -v ./models/gpt2/
func TestStepPeakRSS(t *testing.T) {
	layers, _ := strconv.Atoi(os.Getenv("GPT2_STEP_RSS_LAYERS"))
	if layers == 0 {
		t.Skip("a probe: set GPT2_STEP_RSS_LAYERS")
	}
	// GPT2_STEP_RSS_MODE: "free" (default) ends the step with
	// BackwardAndFree, "trainer" with Backward then FreeGraph, "fused"
	// runs ForwardLoss and BackwardAndFree.
	mode := os.Getenv("GPT2_STEP_RSS_MODE")
	t.Logf("mode %q, %d layers", mode, layers)
	cfg := Config124M.Padded(64)
	cfg.Layers = layers
	rng := tensor.NewRNG(1)
	m, err := New(rng, cfg)
	require.NoError(t, err)
	params := nn.Parameters(m)
	opt, err := optim.NewAdamW(params, optim.DefaultAdamW())
	require.NoError(t, err)
	const B, T = 2, 1024
	idx := make([]int64, B*T)
	tgt := make([]int64, B*T)
	for i := range idx {
		idx[i] = int64((i * 7919) % cfg.VocabSize)
		tgt[i] = int64((i*7919 + 1) % cfg.VocabSize)
	}
	x := autograd.Const(tensor.FromI64(idx, B, T))
	y := tensor.FromI64(tgt, B, T)
	for step := range 2 {
		start := time.Now()
		opt.ZeroGrad()
		var loss *autograd.Variable
		if mode == "fused" {
			loss = m.ForwardLoss(x, y)
		} else {
			loss = m.Loss(m.Forward(x), y)
		}
		if mode == "trainer" { // the trainer's step today
			require.NoError(t, loss.Backward())
			loss.FreeGraph()
		} else {
			require.NoError(t, loss.BackwardAndFree())
		}
		require.NoError(t, opt.Step())
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		st := tensor.Host().Stats()
		t.Logf("step %d: loss %.4f, %.1f s, peak RSS %.2f GB, allocator peak %.2f GB, reserved %.2f GB",
			step, loss.Value.Item(), time.Since(start).Seconds(), float64(ru.Maxrss<<10)/1e9,
			float64(st.PeakAllocated)/1e9, float64(st.Reserved)/1e9)
	}
}
