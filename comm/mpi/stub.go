//go:build !mpi

package mpi

import (
	"context"

	"github.com/goddp/goddp/comm/backend"
)

// The default build has no MPI: the backend name is still registered so
// that asking for it says how to get it, rather than "unknown backend".
func init() {
	backend.Register("mpi", func(context.Context, backend.Options) (backend.ProcessGroup, error) {
		return nil, ErrNotCompiled
	})
}

// New joins the MPI job; without the mpi build tag it returns ErrNotCompiled.
func New(ctx context.Context, opts Options) (backend.ProcessGroup, error) {
	return nil, ErrNotCompiled
}
