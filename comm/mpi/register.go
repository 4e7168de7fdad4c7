//go:build mpi

package mpi

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
)

func init() { backend.Register("mpi", factory) }

// factory is the comm backend: it joins MPI_COMM_WORLD and checks that the
// rank and size comm.Init was given agree with MPI's.
func factory(ctx context.Context, o backend.Options) (backend.ProcessGroup, error) {
	pg, err := New(ctx, Options{Timeout: o.Timeout, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	if pg.Rank() != o.Rank || pg.Size() != o.Size {
		err := fmt.Errorf("%w: comm.Init says rank %d of %d but MPI_COMM_WORLD says rank %d of %d (take RANK/WORLD_SIZE from mpirun: comm.ConfigFromEnv reads OMPI_COMM_WORLD_RANK/SIZE when RANK is unset)",
			backend.ErrBadArgument, o.Rank, o.Size, pg.Rank(), pg.Size())
		if cerr := pg.Close(); cerr != nil {
			err = fmt.Errorf("%w (closing: %v)", err, cerr)
		}
		return nil, err
	}
	return pg, nil
}
