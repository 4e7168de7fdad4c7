// Command torchfail is a goddp program that fails on one rank, for the
// torchrun tests of e2e: every rank joins the group with comm.InitFromEnv
// (so under torchrun, through the agent's store) and all-reduces once;
// then the rank given by -fail-rank records why it gives up with
// launch.RecordError and exits 1, while the others wait to be stopped.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/launch"
)

func main() {
	failRank := flag.Int("fail-rank", 1, "the rank that fails")
	flag.Parse()
	if err := run(*failRank); err != nil {
		_ = launch.RecordError(err)
		fmt.Fprintf(os.Stderr, "torchfail: %v\n", err)
		os.Exit(1)
	}
}

func run(failRank int) error {
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	one := []float32{1}
	if err := pg.AllReduce(comm.Float32s(one), comm.Sum).Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("rank %d: all-reduced %v over %d ranks\n", pg.Rank(), one[0], pg.Size())
	if pg.Rank() == failRank {
		return fmt.Errorf("rank %d: loss is NaN at step 7 (goddp test failure)", pg.Rank())
	}
	// Stopped by the launcher once it sees the failure.
	time.Sleep(2 * time.Minute)
	return nil
}
