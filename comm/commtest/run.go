package commtest

import (
	"fmt"
	"sync"

	"github.com/goddp/goddp/comm/backend"
)

// Run calls fn once per group, each on its own goroutine (the ranks of one
// in-process world, as NewGroups returns them), and returns the errors by
// rank. A panicking rank returns an error naming it instead of killing the
// test binary, so the other ranks' results are still seen.
func Run(pgs []backend.ProcessGroup, fn func(pg backend.ProcessGroup) error) []error {
	errs := make([]error, len(pgs))
	var wg sync.WaitGroup
	for r, pg := range pgs {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("rank %d panicked: %v", r, p)
				}
			}()
			errs[r] = fn(pg)
		})
	}
	wg.Wait()
	return errs
}
