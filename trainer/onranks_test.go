package trainer

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

// onRanks runs fn for every in-memory group of pgs at once, one goroutine
// a rank, and fails the test naming each rank whose fn returned an error.
func onRanks(t *testing.T, pgs []backend.ProcessGroup, fn func(r int, pg backend.ProcessGroup) error) {
	t.Helper()
	errs := make([]error, len(pgs))
	var wg sync.WaitGroup
	for r, pg := range pgs {
		wg.Go(func() { errs[r] = fn(r, pg) })
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
