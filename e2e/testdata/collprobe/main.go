// Command collprobe is a small, deliberately faulty distributed program for
// the e2e fault suite. After one matching all-reduce it either
//
//   - -mismatch MODE: has rank 1 issue a different collective from the
//     other ranks, as a rank that took another branch would: "op" (sum
//     against max on the same buffer, which no size check can see), "size"
//     (4 floats against 8), "dtype" (4 float32 against 2 float64, the same
//     bytes) or "kind" (all-reduce against broadcast); or
//   - -late R -late-for D: has rank R sleep for D (alive and answering, just
//     busy) before the next all-reduce, so the others wait on it.
//
// Each rank prints when it issues the second collective and its result,
// and exits 1 with the error on a failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/goddp/goddp/comm"
)

func main() {
	mismatch := flag.String("mismatch", "", "what rank 1 does differently: op, size, dtype or kind")
	late := flag.Int("late", -1, "the rank that arrives late at the second all-reduce")
	lateFor := flag.Duration("late-for", 4*time.Second, "how late -late is")
	flag.Parse()
	if err := run(*mismatch, *late, *lateFor); err != nil {
		fmt.Fprintf(os.Stderr, "collprobe: %v\n", err)
		os.Exit(1)
	}
}

func run(mismatch string, late int, lateFor time.Duration) error {
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	r := pg.Rank()
	warm := []float32{1, 2, 3, 4}
	if err := pg.AllReduce(comm.Float32s(warm), comm.Sum).Wait(ctx); err != nil {
		return fmt.Errorf("rank %d: matching all-reduce: %w", r, err)
	}
	if r == late {
		time.Sleep(lateFor)
	}
	x := []float32{float32(r + 1), float32(10 * (r + 1)), 3, 4}
	fmt.Printf("rank %d: issuing the second collective\n", r)
	var w comm.Work
	switch {
	case r != 1 || mismatch == "":
		w = pg.AllReduce(comm.Float32s(x), comm.Sum)
	case mismatch == "op":
		w = pg.AllReduce(comm.Float32s(x), comm.Max)
	case mismatch == "size":
		w = pg.AllReduce(comm.Float32s(append(x, 5, 6, 7, 8)), comm.Sum)
	case mismatch == "dtype":
		w = pg.AllReduce(comm.Float64s([]float64{1, 2}), comm.Sum)
	case mismatch == "kind":
		w = pg.Broadcast(comm.Float32s(x), 0)
	default:
		return fmt.Errorf("unknown -mismatch %q", mismatch)
	}
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("rank %d: second collective (mismatch %q): %w", r, mismatch, err)
	}
	// A last barrier, so no rank closes the group while another still
	// needs it.
	if err := pg.Barrier().Wait(ctx); err != nil {
		return fmt.Errorf("rank %d: closing barrier: %w", r, err)
	}
	fmt.Printf("rank %d: result %v\n", r, x)
	return nil
}
