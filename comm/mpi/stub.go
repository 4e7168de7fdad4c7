//go:build !mpi

package mpi

import (
	"context"

	"goddp/comm"
)

// The default build has no MPI: the backend name is still registered so
// that asking for it says how to get it, rather than "unknown backend".
func init() {
	comm.Register("mpi", func(context.Context, comm.Options) (comm.ProcessGroup, error) {
		return nil, ErrNotCompiled
	})
}

// New joins the MPI job; without the mpi build tag it returns ErrNotCompiled.
func New(ctx context.Context, opts Options) (comm.ProcessGroup, error) {
	return nil, ErrNotCompiled
}
