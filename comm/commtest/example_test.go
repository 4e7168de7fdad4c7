package commtest_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
)

// Three ranks of one process all-reduce, as a unit test of code that takes
// a comm.ProcessGroup would run them.
func ExampleNewGroups() {
	ctx := context.Background()
	sums := make([]float32, 3)
	errs := commtest.Run(commtest.NewGroups(3), func(pg comm.ProcessGroup) error {
		x := []float32{float32(pg.Rank() + 1)}
		if err := pg.AllReduce(comm.Float32s(x), comm.Sum).Wait(ctx); err != nil {
			return err
		}
		sums[pg.Rank()] = x[0]
		return nil
	})
	fmt.Println(sums, errs)
	// Output: [6 6 6] [<nil> <nil> <nil>]
}

// A backend runs the conformance table on each of its ranks.
func ExampleRunCases() {
	ctx := context.Background()
	var cases []commtest.Case
	for _, c := range commtest.Cases(2, []int{0, 5}, 0) {
		if c.Op == "allreduce" || c.Op == "broadcast" || c.Op == "barrier" {
			cases = append(cases, c) // what the in-memory group implements
		}
	}
	errs := commtest.Run(commtest.NewGroups(2), func(pg comm.ProcessGroup) error {
		_, err := commtest.RunCases(ctx, pg, cases)
		return err
	})
	fmt.Println(len(cases), errs)
	// Output: 73 [<nil> <nil>]
}
