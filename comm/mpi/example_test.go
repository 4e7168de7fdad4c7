package mpi_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/mpi"
)

// A program started by mpirun joins the job and averages a buffer. Outside
// mpirun, or without -tags mpi, New says why it cannot.
func Example() {
	ctx := context.Background()
	pg, err := mpi.New(ctx, mpi.Options{})
	switch {
	case errors.Is(err, mpi.ErrNotCompiled), errors.Is(err, mpi.ErrNotUnderMPI):
		fmt.Println("no MPI here:", err)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer pg.Close() // finalizes MPI: every rank must close
	grad := []float32{1, 2, 3}
	if err := pg.AllReduce(comm.Float32s(grad), comm.Avg).Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("rank %d of %d: %v\n", pg.Rank(), pg.Size(), grad)
}
