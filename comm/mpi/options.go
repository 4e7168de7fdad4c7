package mpi

import (
	"os"
	"time"
)

// Options configure New.
type Options struct {
	// Timeout bounds every op; 0 means comm.DefaultTimeout (10 minutes).
	// MPI cannot cancel a collective, so an op that times out leaves the
	// group unusable: every later op fails with the same error.
	Timeout time.Duration
	// Logf receives diagnostics; nil means stderr on rank 0 and silence
	// elsewhere, as comm's tcp and shm backends.
	Logf func(format string, args ...any)
	// AllowSingleton lets New initialise MPI in a process that no MPI
	// launcher started (an MPI "singleton", world size 1). Without it New
	// returns ErrNotUnderMPI there, since some MPI builds hang or fork a
	// daemon when initialised outside mpirun.
	AllowSingleton bool
}

// UnderLauncher reports whether an MPI launcher (OpenMPI's mpirun, a PMIx
// or PMI launcher such as srun --mpi=pmix) started this process.
func UnderLauncher() bool {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"} {
		if _, ok := os.LookupEnv(k); ok {
			return true
		}
	}
	return false
}
