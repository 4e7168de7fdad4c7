package mpi

import "errors"

// Sentinel errors. Returned errors wrap them with %w.
var (
	// ErrNotCompiled: this binary was built without the mpi build tag, so
	// there is no MPI in it. Rebuild with `go build -tags mpi` (cgo and
	// an MPI library with pkg-config name "ompi", e.g. Debian's
	// libopenmpi-dev, are then needed).
	ErrNotCompiled = errors.New("mpi: goddp was built without MPI support: rebuild with -tags mpi (needs cgo and libopenmpi-dev)")
	// ErrNotUnderMPI: the process was not started by mpirun (or another
	// MPI launcher), so there is no MPI job to join.
	ErrNotUnderMPI = errors.New("mpi: not started by an MPI launcher (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE in the environment): run under mpirun, or set Options.AllowSingleton")
	// ErrMPI: the MPI library returned an error; the message carries MPI's own text.
	ErrMPI = errors.New("mpi: MPI error")
)
