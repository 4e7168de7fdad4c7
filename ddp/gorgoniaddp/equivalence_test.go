//go:build !cuda

package gorgoniaddp_test

import (
	"github.com/goddp/goddp/comm/commtest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two ranks, each training the gorgonia graph on half the batch under DDP
// (in-memory groups), follow single-process gorgonia training on the whole
// batch step for step, whichever optimizer takes the step.
func TestEquivalenceInMemory(t *testing.T) {
	ref, err := trainGorgonia(0, nSamples)
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		useSolver bool
	}{{"goddp SGD", false}, {"gorgonia VanillaSolver", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const world = 2
			pgs := commtest.NewGroups(world)
			hists := make([][][][]float32, world)
			errs := make([]error, world)
			var wg sync.WaitGroup
			for r := range world {
				wg.Add(1)
				go func() {
					defer wg.Done()
					hists[r], errs[r] = trainRank(pgs[r], tc.useSolver)
				}()
			}
			wg.Wait()
			for r := range world {
				require.NoError(t, errs[r], "rank %d", r)
				assert.NoError(t, closeTo(hists[r], ref, 1e-5), "rank %d", r)
			}
			assert.Equal(t, hists[0], hists[1], "ranks must agree bit for bit")
		})
	}
}
