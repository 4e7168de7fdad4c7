package autograd

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSteadyStepGarbageIndependentOfParams: once Grad buffers exist, a
// training step (forward, backward, in-place update, ZeroGrad) allocates
// only activation-sized memory. With batch 2 and width 512 the parameters
// take 2 MiB; a step must allocate far less than one weight matrix.
func TestSteadyStepGarbageIndependentOfParams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const width, batch = 512, 2
	var params []*Variable
	for l := 0; l < 2; l++ {
		params = append(params, Param(randF32(r, 0.05, width, width)), Param(randF32(r, 0.05, width)))
	}
	x := Param(randF32(r, 1, batch, width)) // an input that takes a gradient too
	emb := Param(randF32(r, 1, 100, width))
	ln := Param(randF32(r, 1, width))
	step := func() {
		h := Add(x, IndexSelect(emb, 0, []int{3, 7}))
		h = LayerNorm(h, ln, nil, 1e-5)
		for l := 0; l < 2; l++ {
			h = ReLU(Linear(h, params[2*l], params[2*l+1]))
		}
		h = MatMul(h, params[0])
		require.NoError(t, CrossEntropy(h, []int{1, 2}, ReductionMean).Backward())
		for _, p := range append(params, x, emb, ln) {
			p.ZeroGrad()
		}
	}
	step()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const steps = 10
	for i := 0; i < steps; i++ {
		step()
	}
	runtime.ReadMemStats(&after)
	perStep := (after.TotalAlloc - before.TotalAlloc) / steps
	weightBytes := uint64(width * width * 4)
	t.Logf("%d bytes per step; one weight matrix is %d bytes", perStep, weightBytes)
	require.Less(t, perStep, weightBytes/4, "a steady step allocates parameter-sized garbage")
}
